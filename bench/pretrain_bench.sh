#!/usr/bin/env bash
# Pre-training throughput, side by side in one run (run by hand; not a test):
#   1. `tupe pretrain` (BERT-A) vs a PyTorch-Python loop with HF BertForMaskedLM + AdamW
#      (bench/hf_mlm_loop.py) at the same sizes, sequence length, batch, precision, threads.
#      HF runs twice per round: with glibc's default malloc, as a user would run it, and with
#      the malloc policy tupe sets for itself (common/host_memory.h), so the ratio is also
#      shown without that advantage.
#   2. TUPE-R vs BERT-A step time in tupe: the four variants interleaved step by step in one
#      process (build/trainer/pretrain/variant_step_bench), plus the tokens/s of the separate
#      TUPE-R `tupe pretrain` runs of step 1.
# Needs shards: bench/pretrain_bench.sh SHARD_DIR
# Environment: BENCH_STEPS (30), BENCH_ROUNDS (2), BENCH_RATIO_ROUNDS (30), BENCH_THREADS (1),
# BENCH_PRECISION (fp32|bf16, default fp32), BENCH_HIDDEN (256), BENCH_LAYERS (4),
# BENCH_SEQ (128), BENCH_BATCH (16).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "${TUPE_CACHE:-$HOME/.cache/tupe}/env.sh"
shards="${1:?usage: pretrain_bench.sh SHARD_DIR}"
steps="${BENCH_STEPS:-30}" threads="${BENCH_THREADS:-1}" prec="${BENCH_PRECISION:-fp32}"
H="${BENCH_HIDDEN:-256}" N="${BENCH_LAYERS:-4}" L="${BENCH_SEQ:-128}" B="${BENCH_BATCH:-16}"
heads=$((H / 64)); ffn=$((4 * H))
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
export OMP_NUM_THREADS="$threads"
# tupe's own policy (mallopt in main), expressed as glibc tunables for the Python process.
same_malloc="glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=2147483647"

tupe_tokens_per_s() {  # $1 = position encoding, $2 = untie_cls
  local ck="$work/$1"
  rm -rf "$ck"
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

hf_tokens_per_s() {  # $1 = GLIBC_TUNABLES value ("" = glibc's defaults)
  env GLIBC_TUNABLES="$1" "$TUPE_PYTHON" "$here/bench/hf_mlm_loop.py" --hidden "$H" --layers "$N" --heads "$heads" \
    --ffn "$ffn" --seq "$L" --batch "$B" --steps "$steps" --threads "$threads" --precision "$prec" | awk '{print $3}'
}

echo "sizes: d=$H layers=$N heads=$heads ffn=$ffn seq=$L batch=$B steps=$steps threads=$threads precision=$prec"
# Rounds alternate the systems so that a load change on the machine hits all of them; the
# best round of each is reported.
rounds="${BENCH_ROUNDS:-2}" all_a="" all_hf="" all_hfm="" all_r=""
for ((i = 0; i < rounds; i++)); do
  all_a+=" $(tupe_tokens_per_s bert-absolute false)"
  all_hf+=" $(hf_tokens_per_s "")"
  all_hfm+=" $(hf_tokens_per_s "$same_malloc")"
  all_r+=" $(tupe_tokens_per_s tupe-relative true)"
done
echo "rounds (tokens/s): tupe BERT-A:$all_a | HF:$all_hf | HF, tupe's malloc policy:$all_hfm | tupe TUPE-R:$all_r"
best() { tr ' ' '\n' | sort -g | tail -n 1; }
"$TUPE_PYTHON" - "$(echo $all_a | best)" "$(echo $all_hf | best)" "$(echo $all_hfm | best)" "$(echo $all_r | best)" <<'PY'
import sys
a, hf, hfm, r = map(float, sys.argv[1:])
print(f"{'system (best round)':44s} {'tokens/s':>10s}")
print(f"{'tupe pretrain, BERT-A':44s} {a:10.0f}")
print(f"{'HF BertForMaskedLM + AdamW (PyTorch)':44s} {hf:10.0f}")
print(f"{'the same, with tupe malloc policy':44s} {hfm:10.0f}")
print(f"{'tupe pretrain, TUPE-R':44s} {r:10.0f}")
print(f"ratio tupe BERT-A / HF: {a / hf:.2f}x   (goal >= 2.0); against HF with the same malloc policy: {a / hfm:.2f}x")
print(f"separate runs, step time TUPE-R / BERT-A: {a / r:.3f}x")
PY
echo "TUPE-R vs BERT-A, variants interleaved step by step in one process (goal <= 1.03):"
"$here/build/trainer/pretrain/variant_step_bench" --shards "$shards" --hidden "$H" --layers "$N" --seq "$L" \
  --batch "$B" --threads "$threads" --precision "$prec" --rounds "${BENCH_RATIO_ROUNDS:-30}"
