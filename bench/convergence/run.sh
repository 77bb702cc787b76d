#!/usr/bin/env bash
# Convergence parity with Hugging Face's own recipe (a benchmark, not a test):
# tupe BERT-A (bench/convergence/bert-a-tiny.ini) against transformers' BertForMaskedLM
# trained by a plain PyTorch loop with transformers' initialisation and
# DataCollatorForLanguageModeling (hf_train.py), on the same mixed-english sequences (tupe's
# shards, read by both), the same size and hyperparameters, CONV_SEEDS seeds each. Every
# model is scored on one fixed masked validation set (mlm_data.py) at the same steps: tupe's
# checkpoints through `tupe export` (transformers' own BertForMaskedLM), HF's in its loop.
# Then report.py writes report.md (table, pass/fail) and convergence.png (curves, seed bands).
#
# Usage: bash bench/convergence/run.sh            (resumable: rerun it; finished parts are skipped)
# Environment: CONV_WORK (default runs/convergence), TUPE_BIN (default build/cli/tupe),
#   TUPE_SHARED_DATA (default ../shared/data), MIXED_ENGLISH_SHARDS (default
#   runs/mixed-english/shards, made by bench/mixed_english_shards.sh if missing), CONV_SEEDS ("1 2"),
#   CONV_HF_SEEDS (default CONV_SEEDS: Hugging Face's seeds, for more tupe seeds than HF ones), CONV_STEPS (800),
#   CONV_WARMUP (80), CONV_EVAL_STEPS ("50,100,200,300,400,500,600,700,800"), CONV_THREADS (2).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
# shellcheck disable=SC1091
source "${TUPE_CACHE:-$HOME/.cache/tupe}/env.sh"
tupe="${TUPE_BIN:-$repo/build/cli/tupe}"
data="${TUPE_SHARED_DATA:-$repo/../shared/data}"
work="${CONV_WORK:-$repo/runs/convergence}"
seeds="${CONV_SEEDS:-1 2}"
hf_seeds="${CONV_HF_SEEDS:-$seeds}"
steps="${CONV_STEPS:-800}"
warmup="${CONV_WARMUP:-80}"
eval_steps="${CONV_EVAL_STEPS:-50,100,200,300,400,500,600,700,800}"
threads="${CONV_THREADS:-2}"
vocab="$data/vocab/bert-base-uncased-vocab.txt"
py="$TUPE_PYTHON"
[ -x "$tupe" ] || { echo "convergence: no tupe executable at $tupe (build first: bash launch/build.sh)" >&2; exit 1; }
mkdir -p "$work"
log() { echo "[convergence $(date +%H:%M:%S)] $*"; }

# ---- 1. Shards: train.txt -> train shards, validation.txt -> validation shards ----------------
shards="${MIXED_ENGLISH_SHARDS:-$repo/runs/mixed-english/shards}"
bash "$repo/bench/mixed_english_shards.sh" "$tupe" "$shards"

# ---- 2. tupe: pre-train each seed, keeping the checkpoint of every evaluation step ------------
IFS=, read -r -a evals <<< "$eval_steps"
for seed in $seeds; do
  run="$work/tupe-seed$seed"
  if [ ! -f "$run/done" ]; then
    log "tupe pretrain seed $seed ($steps steps)"
    # every evaluation step is a checkpoint (keep_every = their gcd would keep others too:
    # save every 50 steps and keep the evaluation steps, listed below)
    "$tupe" pretrain --config "$here/bert-a-tiny.ini" \
      --data.train_shards "$shards/train" --data.validation_shards "$shards/validation" \
      --optimizer.total_steps "$steps" --optimizer.warmup_steps "$warmup" \
      --train.seed "$seed" --data.seed "$seed" --train.threads "$threads" \
      --train.eval_every 100 --checkpoint.every_steps 50 --checkpoint.keep_every 50 \
      --checkpoint.dir "$run/checkpoints" --resume auto > "$run.log.tmp" 2>&1 || { cat "$run.log.tmp" >&2; exit 1; }
    cat "$run.log.tmp" >> "$run.log"; rm -f "$run.log.tmp"
    touch "$run/done"
  fi
  for s in "${evals[@]}"; do
    ck="$run/checkpoints/$(printf 'step_%08d' "$s")"
    hf="$run/hf/step-$s"
    [ -d "$ck" ] || { echo "convergence: $ck is missing" >&2; exit 1; }
    [ -f "$hf/config.json" ] || "$tupe" export --checkpoint "$ck" --output "$hf" --vocab "$vocab" > /dev/null
  done
  if [ ! -f "$run/eval.done" ]; then
    log "tupe seed $seed: scoring ${#evals[@]} checkpoints on the fixed validation set"
    "$py" "$here/score_exports.py" --validation "$shards/validation" --run "$run" --steps "$eval_steps" \
      --cache "$work/validation-batches.pt" --threads "$threads"
    touch "$run/eval.done"
  fi
done

# ---- 3. Hugging Face: the same, in its own loop ------------------------------------------------
for seed in $hf_seeds; do
  log "hf seed $seed ($steps steps)"
  "$py" "$here/hf_train.py" --shards "$shards/train" --validation "$shards/validation" --vocab "$vocab" \
    --out "$work/hf-seed$seed" --steps "$steps" --warmup "$warmup" --seed "$seed" --threads "$threads" \
    --eval-steps "$eval_steps"
done

# ---- 4. Report ---------------------------------------------------------------------------------
"$py" "$here/report.py" --work "$work" --seeds "$seeds" --hf-seeds "$hf_seeds" --warmup "$warmup"
log "report: $work/report.md, $work/convergence.png"
