#!/usr/bin/env bash
# Pre-training throughput, side by side in one run (run by hand; not a test):
#   1. `tupe pretrain` vs a PyTorch-Python loop with HF BertForMaskedLM + AdamW
#      (bench/hf_mlm_loop.py) at the same sizes, sequence length, batch, precision, threads;
#   2. TUPE-R vs BERT-A step time in tupe.
# Prints tokens/s and the ratios. Needs shards: bench/pretrain_bench.sh SHARD_DIR
# Environment: BENCH_STEPS (30), BENCH_THREADS (1), BENCH_PRECISION (fp32|bf16, default fp32),
# BENCH_HIDDEN (256), BENCH_LAYERS (4), BENCH_SEQ (128), BENCH_BATCH (16).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "${TUPE_CACHE:-$HOME/.cache/tupe}/env.sh"
shards="${1:?usage: pretrain_bench.sh SHARD_DIR}"
steps="${BENCH_STEPS:-30}" threads="${BENCH_THREADS:-1}" prec="${BENCH_PRECISION:-fp32}"
H="${BENCH_HIDDEN:-256}" N="${BENCH_LAYERS:-4}" L="${BENCH_SEQ:-128}" B="${BENCH_BATCH:-16}"
heads=$((H / 64)); ffn=$((4 * H))
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
export OMP_NUM_THREADS="$threads"

tupe_tokens_per_s() {  # $1 = position encoding, $2 = untie_cls
  local ck="$work/$1"
  "$here/build/cli/tupe" pretrain --config "$here/configs/tiny.ini" --resume none \
    --model.hidden_size "$H" --model.num_layers "$N" --model.num_heads "$heads" --model.ffn_size "$ffn" \
    --model.max_positions "$L" --model.position_encoding "$1" --model.untie_cls "$2" \
    --data.train_shards "$shards" --data.validation_shards "" --data.global_batch_size "$B" \
    --data.pad_to_max_seq_len true --train.micro_batch_size "$B" --train.threads "$threads" \
    --train.max_steps $((steps + 3)) --optimizer.total_steps 100000 --train.log_every 1 --train.progress false \
    --precision.precision "$prec" --checkpoint.dir "$ck" --checkpoint.every_steps 0 >/dev/null
  # mean tokens/s over the steps after 3 warm-up steps (metrics: one record per step)
  "$TUPE_PYTHON" - "$ck/metrics/rank_0.jsonl" <<'PY'
import json, sys
r = [json.loads(l) for l in open(sys.argv[1]) if '"tokens_per_s"' in l][3:]
print(sum(x["tokens_per_s"] * x["step_time_s"] for x in r) / sum(x["step_time_s"] for x in r))
PY
}

echo "sizes: d=$H layers=$N heads=$heads ffn=$ffn seq=$L batch=$B steps=$steps threads=$threads precision=$prec"
# Rounds alternate the three systems so that a load change on the machine hits all of them;
# the best round of each is reported.
rounds="${BENCH_ROUNDS:-2}" all_a="" all_hf="" all_r=""
for ((i = 0; i < rounds; i++)); do
  all_a+=" $(tupe_tokens_per_s bert-absolute false)"
  all_hf+=" $("$TUPE_PYTHON" "$here/bench/hf_mlm_loop.py" --hidden "$H" --layers "$N" --heads "$heads" --ffn "$ffn" \
     --seq "$L" --batch "$B" --steps "$steps" --threads "$threads" --precision "$prec" | awk '{print $3}')"
  all_r+=" $(tupe_tokens_per_s tupe-relative true)"
done
echo "rounds (tokens/s): BERT-A:$all_a | HF:$all_hf | TUPE-R:$all_r"
best() { tr ' ' '\n' | sort -g | tail -n 1; }
"$TUPE_PYTHON" - "$(echo $all_a | best)" "$(echo $all_hf | best)" "$(echo $all_r | best)" <<'PY'
import sys
a, hf, r = map(float, sys.argv[1:])
print(f"{'system':38s} {'tokens/s':>10s}")
print(f"{'tupe pretrain, BERT-A':38s} {a:10.0f}")
print(f"{'HF BertForMaskedLM + AdamW (PyTorch)':38s} {hf:10.0f}")
print(f"{'tupe pretrain, TUPE-R':38s} {r:10.0f}")
print(f"ratio tupe BERT-A / HF: {a / hf:.2f}x   (goal >= 2.0)")
print(f"step time TUPE-R / BERT-A: {a / r:.3f}x   (goal <= 1.03)")
PY
