#!/usr/bin/env bash
# The paper in miniature (Ke, He and Liu, ICLR 2021, Table 1 and Figure 5, at BERT-tiny size
# on mixed-english): pre-trains the five variants of Table 1 with one size, budget and schedule
# (bench/paper_mini/pretrain.ini), BERT-A and TUPE-R with PM_SEEDS_TWICE seeds and the others
# with the first, fine-tunes every model on CoLA, SST-2, MRPC, STS-B, RTE and WNLI with one
# protocol (bench/paper_mini/glue.ini), and writes the report (report.py: report.md in
# Table 1's layout, validation.png with every variant's validation curve, drawn by
# `tupe analyze --run`).
#
# Usage: bash bench/paper_mini/run.sh     (resumable: rerun it after any stop; pre-training
#        continues from the newest checkpoint, finished fine-tunings are kept)
# Environment: PM_WORK (default runs/paper-mini), TUPE_BIN (build/cli/tupe), TUPE_SHARED_DATA
#   (../shared/data), MIXED_ENGLISH_SHARDS (runs/mixed-english/shards), PM_STEPS (1200),
#   PM_SEEDS_TWICE ("1 2"), PM_THREADS (2), PM_TASKS (CoLA SST-2 MRPC STS-B RTE WNLI),
#   PM_ONLY=pretrain|glue|report (one phase).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
# shellcheck disable=SC1091
source "${TUPE_CACHE:-$HOME/.cache/tupe}/env.sh"
tupe="${TUPE_BIN:-$repo/build/cli/tupe}"
data="${TUPE_SHARED_DATA:-$repo/../shared/data}"
work="${PM_WORK:-$repo/runs/paper-mini}"
shards="${MIXED_ENGLISH_SHARDS:-$repo/runs/mixed-english/shards}"
steps="${PM_STEPS:-1200}"
seeds_twice="${PM_SEEDS_TWICE:-1 2}"
threads="${PM_THREADS:-2}"
tasks="${PM_TASKS:-CoLA SST-2 MRPC STS-B RTE WNLI}"
only="${PM_ONLY:-}"
vocab="$data/vocab/bert-base-uncased-vocab.txt"
[ -x "$tupe" ] || { echo "paper_mini: no tupe executable at $tupe (build first: bash launch/build.sh)" >&2; exit 1; }
mkdir -p "$work"
log() { echo "[paper-mini $(date +%H:%M:%S)] $*"; }
bash "$repo/bench/mixed_english_shards.sh" "$tupe" "$shards"

# name | position_encoding | untie_cls   (Table 1's rows; "tie-cls" is TUPE-R without the [CLS] untie)
variants=("BERT-A bert-absolute false" "BERT-R bert-relative false" "TUPE-A tupe-absolute true"
          "TUPE-R tupe-relative true" "TUPE-R-tie-cls tupe-relative false")
first_seed="${seeds_twice%% *}"
models=()
for v in "${variants[@]}"; do
  read -r name pe untie <<< "$v"
  seeds="$first_seed"
  case "$name" in BERT-A|TUPE-R) seeds="$seeds_twice" ;; esac
  for seed in $seeds; do models+=("$name $pe $untie $seed"); done
done

# ---- Pre-training (interleaved by seed so that every variant's first run finishes early) ------
if [ -z "$only" ] || [ "$only" = pretrain ]; then
  for m in "${models[@]}"; do
    read -r name pe untie seed <<< "$m"
    run="$work/pretrain/$name-seed$seed"
    [ -f "$run/done" ] && continue
    mkdir -p "$run"
    log "pre-train $name seed $seed ($steps steps)"
    "$tupe" pretrain --config "$here/pretrain.ini" --model.position_encoding "$pe" --model.untie_cls "$untie" \
      --data.train_shards "$shards/train" --data.validation_shards "$shards/validation" \
      --optimizer.total_steps "$steps" --optimizer.warmup_steps $((steps / 10)) --train.eval_every 100 \
      --train.seed "$seed" --data.seed "$seed" --train.threads "$threads" \
      --checkpoint.dir "$run/checkpoints" --resume auto >> "$run/pretrain.log" 2>&1 ||
      { tail -5 "$run/pretrain.log" >&2; exit 1; }
    touch "$run/done"
  done
fi

# ---- GLUE: every model, every task, one protocol; one folder per (model, task) -------------------
if [ -z "$only" ] || [ "$only" = glue ]; then
  for m in "${models[@]}"; do
    read -r name pe untie seed <<< "$m"
    ckpt="$work/pretrain/$name-seed$seed/checkpoints"
    [ -f "$work/pretrain/$name-seed$seed/done" ] || { log "skip GLUE of $name seed $seed: not pre-trained"; continue; }
    for task in $tasks; do
      out="$work/glue/$name-seed$seed/$task"
      [ -f "$out/results.json" ] && continue
      log "GLUE $task: $name seed $seed"
      rm -rf "$out" "$out.tmp"  # a killed fine-tuning restarts from its beginning
      mkdir -p "$(dirname "$out")"
      "$tupe" finetune --config "$here/glue.ini" --finetune.tasks "$task" --finetune.checkpoint "$ckpt" \
        --finetune.data_dir "$data/glue" --tokenizer.vocab "$vocab" --finetune.output_dir "$out.tmp" \
        --finetune.model_name "$name" --finetune.threads "$threads" > "$out.log" 2>&1 ||
        { tail -5 "$out.log" >&2; exit 1; }
      mv "$out.tmp" "$out"
    done
  done
fi

# ---- Report ------------------------------------------------------------------------------------
if [ -z "$only" ] || [ "$only" = report ]; then
  "$TUPE_PYTHON" "$here/report.py" --work "$work" --tasks "$tasks" --tupe "$tupe"
  log "report: $work/report.md, $work/validation.png"
fi
