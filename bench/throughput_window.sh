#!/usr/bin/env bash
# The throughput window keeps validation and checkpoint time out of tokens/s:
# a tiny TUPE-R on WikiText-2, 60 steps, logged every 10, run with validation (and a
# checkpoint) every 10 steps and without, interleaved ROUNDS times; prints the median
# tokens/s of each (log windows 2..6; the first holds start-up) and their ratio, which
# should be 1 within noise. Before the fix the "with" runs' windows each held one validation.
# Usage: bench/throughput_window.sh [BUILD_DIR] [ROUNDS=3]   (by hand; not a test)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$here/build}"
rounds="${2:-3}"
tupe="$build/cli/tupe"
data="${TUPE_SHARED_DATA:-$here/../shared/data}"
work="$(mktemp -d "${TMPDIR:-/tmp}/tupe-window.XXXXXX")"
trap 'rm -rf "$work"' EXIT
# shellcheck disable=SC1091
source "${TUPE_CACHE:-$HOME/.cache/tupe}/env.sh"
"$tupe" preprocess --config "$here/configs/tiny.ini" --input "$data/text/wikitext-2/wiki.test.raw" \
  --tokenizer.vocab "$data/vocab/bert-base-uncased-vocab.txt" --output "$work/shards" --quiet
run() {  # NAME EVAL_EVERY
  "$tupe" pretrain --config "$here/configs/tiny.ini" --resume none --data.train_shards "$work/shards" \
    --data.validation_shards "$work/shards" --train.eval_batches 20 --checkpoint.dir "$work/$1" \
    --checkpoint.every_steps "$2" --optimizer.total_steps 60 --train.log_every 10 --train.eval_every "$2" \
    --train.threads 1 --train.progress false --precision.precision fp32 > "$work/$1.log" 2>&1
}
for r in $(seq "$rounds"); do
  run "with_$r" 10
  run "without_$r" 0
done
"$TUPE_PYTHON" - "$work" "$rounds" <<'PY'
import json, os, statistics, sys
work, rounds = sys.argv[1], int(sys.argv[2])
def rates(name):
    recs = [json.loads(l) for l in open(os.path.join(work, name, "metrics", "rank_0.jsonl")) if '"tokens_per_s"' in l]
    return [r["tokens_per_s"] for r in recs[1:]]
w = [x for r in range(1, rounds + 1) for x in rates(f"with_{r}")]
wo = [x for r in range(1, rounds + 1) for x in rates(f"without_{r}")]
mw, mwo = statistics.median(w), statistics.median(wo)
print(f"tokens/s, median of {len(w)} windows: with validation+checkpoint every 10 steps {mw:.0f}, "
      f"without {mwo:.0f}; ratio {mw / mwo:.3f} (spread with {min(w):.0f}-{max(w):.0f}, without {min(wo):.0f}-{max(wo):.0f})")
PY
