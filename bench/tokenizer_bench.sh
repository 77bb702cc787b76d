#!/usr/bin/env bash
# WordPiece throughput, ours vs HuggingFace `tokenizers` (Rust, through Python, one thread),
# on the same text in one run: tokens/s of both, the ratio, and whether the ids are identical.
# Not a test (timings on a shared machine vary); run by hand:
#   bench/tokenizer_bench.sh [BUILD_DIR] [TEXT] [VOCAB] [--cased]
# Defaults: build-text, ../shared/data/text/wikitext-2/wiki.test.raw, the uncased BERT vocab.
# Needs the tokenizer_bench target built (tests/text/CMakeLists.txt) and $TUPE_PYTHON (or
# the venv from launch/setup.sh) with transformers + tokenizers.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$here/build-text}"
shared="${TUPE_SHARED_DATA:-$here/../shared/data}"
text="${2:-$shared/text/wikitext-2/wiki.test.raw}"
vocab="${3:-$shared/vocab/bert-base-uncased-vocab.txt}"
cased_flag="${4:-}"
repeat="${TUPE_BENCH_REPEAT:-5}"
if [ -z "${TUPE_PYTHON:-}" ] && [ -f "${TUPE_CACHE:-$HOME/.cache/tupe}/env.sh" ]; then
  # shellcheck disable=SC1091
  source "${TUPE_CACHE:-$HOME/.cache/tupe}/env.sh"
fi
py="${TUPE_PYTHON:-python3}"
bench="$build/tests/text/tokenizer_bench"
[ -x "$bench" ] || { echo "tokenizer_bench: $bench not built (cmake --build $build --target tokenizer_bench)" >&2; exit 2; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

echo "text:  $text ($(wc -c <"$text") bytes)"
echo "vocab: $vocab ${cased_flag:-(lower-case + strip accents)}"
ours_line="$("$bench" --vocab "$vocab" --text "$text" --repeat "$repeat" --ids-out "$work/ours.ids" $cased_flag)"
echo "$ours_line"

# HuggingFace: BertTokenizerFast's Rust pipeline, encode_batch over the same lines, 1 thread.
hf_line="$(RAYON_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false "$py" - "$vocab" "$text" "$repeat" "$work/hf.ids" \
           "${cased_flag:+cased}" <<'EOF'
import sys, time
from transformers import BertTokenizerFast
from transformers.models.bert.tokenization_bert import load_vocab
vocab_path, text_path, repeat, out_path = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
cased = len(sys.argv) > 5 and sys.argv[5] == "cased"
vocab = load_vocab(vocab_path)
tok = BertTokenizerFast(vocab=vocab, do_lower_case=not cased).backend_tokenizer
assert tok.get_vocab_size() == len(vocab)
with open(text_path, "rb") as f:
    data = f.read()
lines = data.decode("utf-8").split("\n")
best = float("inf")
for _ in range(repeat):
    t0 = time.perf_counter()
    encs = tok.encode_batch(lines, add_special_tokens=False)
    best = min(best, time.perf_counter() - t0)
tokens = sum(len(e.ids) for e in encs)
with open(out_path, "w") as f:
    for e in encs:
        f.write(" ".join(map(str, e.ids)) + "\n")
print(f"HF tokenizers (Rust, 1 thread): {len(lines)} lines, {tokens} tokens, {len(data)/1e6:.1f} MB, "
      f"best of {repeat}: {best:.4f} s, {tokens/best:.0f} tokens/s, {len(data)/1e6/best:.2f} MB/s")
EOF
)"
echo "$hf_line"

ours_tps="$(sed -E 's/.* ([0-9]+) tokens\/s.*/\1/' <<<"$ours_line")"
hf_tps="$(sed -E 's/.* ([0-9]+) tokens\/s.*/\1/' <<<"$hf_line")"
awk -v a="$ours_tps" -v b="$hf_tps" 'BEGIN { printf "ratio tupe / HF: %.2fx\n", a / b }'
if cmp -s "$work/ours.ids" "$work/hf.ids"; then
  echo "ids identical: yes ($(wc -l <"$work/ours.ids") lines)"
else
  echo "ids identical: NO"
  diff <(cat -n "$work/ours.ids") <(cat -n "$work/hf.ids") | head -5
  exit 1
fi
