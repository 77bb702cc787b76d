#!/usr/bin/env bash
# Time to quality against Hugging Face, side by side (a benchmark, not a test): the seconds of
# training that tupe's TUPE-R and HF's BERT-A recipe (BertForMaskedLM in a plain PyTorch loop,
# bench/convergence/hf_train.py) take to reach HF BERT-A's validation loss at its final step.
# One machine, one script, the same thread count for both, runs alternating: HF seed s, tupe
# seed s, HF seed s+1, tupe seed s+1, ... so that a change of machine load hits both sides.
#
# Both sides: the convergence benchmark's shards (bench/mixed_english_shards.sh), size and
# hyperparameters (bench/convergence/bert-a-tiny.ini: d 128, 2 layers, 2 heads, FFN 512,
# batch 32 x 128, AdamW 1e-3, linear warm-up and decay, dropout 0.1, fp32), TTQ_STEPS steps
# each. tupe runs that file with model.position_encoding = tupe-relative and untie_cls = true
# (TUPE-R as in docs/paper.md), everything else as the file says (type_vocab_size = 2 too).
# Every TTQ_EVAL_EVERY steps (and at the last) both are scored by one piece of code on one
# fixed masked validation set: HF in its loop, tupe afterwards from its kept checkpoints
# (`tupe export`, convergence/score_exports.py; not timed).
#
# Target: per round, that round's HF run's validation loss at its final step. A side's time
# to target is its training time at its first evaluation step at or under the target (HF:
# normally its last step), so the resolution is TTQ_EVAL_EVERY steps. Training time excludes
# evaluation, checkpoint writes and process start-up on both sides: HF's "train_s" records
# (hf_train.py), tupe's step_time_s log windows (the trainer keeps validation and checkpoint
# saves out of them; logged at every evaluation step). Threads: TTQ_THREADS intra-op threads
# on both sides (tupe's train.threads, torch.set_num_threads in HF), plus tupe's one batch-
# building thread (data.num_threads = 1 in the .ini) where HF builds batches in its loop.
# Report: WORK/report.md (convergence/ttq_report.py): per round both times, the steps, the
# ratio HF / tupe; its median, min and max.
#
# Usage: bash bench/time_to_quality.sh   (resumable: rerun it; finished runs are skipped)
# Environment: TTQ_WORK (default runs/time-to-quality), TUPE_BIN (default build/cli/tupe),
#   TUPE_SHARED_DATA (default ../shared/data), MIXED_ENGLISH_SHARDS (default
#   runs/mixed-english/shards, made by bench/mixed_english_shards.sh if missing), TTQ_SEEDS
#   ("1 2"), TTQ_STEPS (400), TTQ_WARMUP (TTQ_STEPS / 10), TTQ_EVAL_EVERY (25), TTQ_THREADS (2),
#   TTQ_KEEP_CHECKPOINTS (0: tupe's step checkpoints are removed once exported; 1 keeps them).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
conv="$here/convergence"
# shellcheck disable=SC1091
source "${TUPE_CACHE:-$HOME/.cache/tupe}/env.sh"
tupe="${TUPE_BIN:-$repo/build/cli/tupe}"
data="${TUPE_SHARED_DATA:-$repo/../shared/data}"
work="${TTQ_WORK:-$repo/runs/time-to-quality}"
seeds="${TTQ_SEEDS:-1 2}"
steps="${TTQ_STEPS:-400}"
warmup="${TTQ_WARMUP:-$((steps / 10))}"
every="${TTQ_EVAL_EVERY:-25}"
threads="${TTQ_THREADS:-2}"
keep="${TTQ_KEEP_CHECKPOINTS:-0}"
vocab="$data/vocab/bert-base-uncased-vocab.txt"
py="$TUPE_PYTHON"
[ -x "$tupe" ] || { echo "time_to_quality: no tupe executable at $tupe (build first: bash launch/build.sh)" >&2; exit 1; }
if [ "$every" -lt 1 ] || [ "$every" -gt "$steps" ]; then
  echo "time_to_quality: TTQ_EVAL_EVERY=$every must be in [1, TTQ_STEPS=$steps]" >&2; exit 1
fi
mkdir -p "$work"
log() { echo "[time_to_quality $(date +%H:%M:%S)] $*"; }

# The evaluation steps: every `every`, and the last.
evals=()
for ((s = every; s <= steps; s += every)); do evals+=("$s"); done
[ "${evals[-1]}" -eq "$steps" ] || evals+=("$steps")
eval_steps="$(IFS=,; echo "${evals[*]}")"

# The settings of this work folder; a rerun with other ones would mix runs.
settings="steps=$steps warmup=$warmup every=$every threads=$threads"
if [ -f "$work/settings" ] && [ "$(cat "$work/settings")" != "$settings" ]; then
  echo "time_to_quality: $work holds runs made with '$(cat "$work/settings")', not '$settings' (use another TTQ_WORK)" >&2
  exit 1
fi
echo "$settings" > "$work/settings"

shards="${MIXED_ENGLISH_SHARDS:-$repo/runs/mixed-english/shards}"
bash "$repo/bench/mixed_english_shards.sh" "$tupe" "$shards"

hf_run() {  # seed: HF BERT-A, scored in its loop at every evaluation step (resumes, skips if done)
  log "hf BERT-A seed $1 ($steps steps, $threads thread(s))"
  "$py" "$conv/hf_train.py" --shards "$shards/train" --validation "$shards/validation" --vocab "$vocab" \
    --out "$work/hf-seed$1" --steps "$steps" --warmup "$warmup" --seed "$1" --threads "$threads" \
    --eval-steps "$eval_steps"
}

tupe_run() {  # seed: tupe TUPE-R, a kept checkpoint at every evaluation step, then exported and scored
  local run="$work/tupe-seed$1" s ck
  mkdir -p "$run"
  if [ ! -f "$run/done" ]; then
    log "tupe TUPE-R seed $1 ($steps steps, $threads thread(s))"
    # no validation shards: tupe's own validation is not needed (scored below from the exports)
    "$tupe" pretrain --config "$conv/bert-a-tiny.ini" \
      --model.position_encoding tupe-relative --model.untie_cls true \
      --data.train_shards "$shards/train" \
      --optimizer.total_steps "$steps" --optimizer.warmup_steps "$warmup" \
      --train.seed "$1" --data.seed "$1" --train.threads "$threads" --train.log_every "$every" \
      --checkpoint.every_steps "$every" --checkpoint.keep_every "$every" \
      --checkpoint.dir "$run/checkpoints" --resume auto > "$run.log.tmp" 2>&1 || { cat "$run.log.tmp" >&2; exit 1; }
    cat "$run.log.tmp" >> "$run.log"; rm -f "$run.log.tmp"
    touch "$run/done"
  fi
  for s in "${evals[@]}"; do
    ck="$run/checkpoints/$(printf 'step_%08d' "$s")"
    if [ ! -f "$run/hf/step-$s/config.json" ]; then
      [ -d "$ck" ] || { echo "time_to_quality: $ck is missing" >&2; exit 1; }
      "$tupe" export --checkpoint "$ck" --output "$run/hf/step-$s" --vocab "$vocab" > /dev/null
    fi
  done
  if [ "$keep" = 0 ]; then rm -rf "$run"/checkpoints/step_*; fi
  if [ ! -f "$run/eval.done" ]; then
    log "tupe seed $1: scoring ${#evals[@]} checkpoints on the fixed validation set"
    "$py" "$conv/score_exports.py" --validation "$shards/validation" --run "$run" --steps "$eval_steps" \
      --cache "$work/validation-batches.pt" --threads "$threads"
    touch "$run/eval.done"
  fi
}

for seed in $seeds; do
  hf_run "$seed"
  tupe_run "$seed"
done

"$py" "$conv/ttq_report.py" --work "$work" --seeds "$seeds" --steps "$steps" --threads "$threads"
log "report: $work/report.md"
