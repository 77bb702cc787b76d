#!/usr/bin/env bash
# The quick start: from a fresh machine, set up and build, show the paper's TUPE-R base
# config, preprocess real text (WikiText-2 from ../shared/data, or a corpus you name),
# pre-train a tiny TUPE-R under mpirun on this machine's CPUs (or GPU) with checkpoints,
# stop it halfway, resume it, and fine-tune the result on a GLUE task
# (`tupe finetune`, which prints the GLUE table once).
#
# Usage: launch/quickstart.sh [CORPUS_FILE_OR_FOLDER]
# Environment: TUPE_RANKS (default 2), TUPE_QUICK_STEPS (default 200), TUPE_RUN_DIR (runs/quickstart),
#   TUPE_QUICK_GLUE_TASKS (default SST-2), TUPE_QUICK_GLUE_ROWS (training rows per task, 4000),
#   TUPE_BUILD_DIR (default build), TUPE_SHARED_DATA (the real data; default ../shared/data)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
shared="${TUPE_SHARED_DATA:-$here/../shared/data}"
corpus="${1:-$shared/text/wikitext-2/wiki.test.raw}"
ranks="${TUPE_RANKS:-2}"
steps="${TUPE_QUICK_STEPS:-200}"
run="${TUPE_RUN_DIR:-runs/quickstart}"
say() { printf '\n==> %s\n' "$*"; }

say "setup and build the tupe executable (idempotent; the first run downloads LibTorch ~5 GB)"
build="${TUPE_BUILD_DIR:-$here/build}"
TUPE_BUILD_TARGET=tupe bash launch/build.sh "$build"  # only what the quick start runs; test.sh builds the rest
tupe="$build/cli/tupe"
# Open MPI refuses root unless told; containers often lack ptrace for its single-copy path.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
mpirun=(mpirun -np "$ranks" --oversubscribe --bind-to none)

say "the paper's TUPE-R at BERT-Base size"
"$tupe" info --config configs/tupe-r-base.ini

say "preprocess $corpus into HDF5 shards ($ranks ranks)"
"${mpirun[@]}" "$tupe" preprocess --config configs/tiny.ini --input "$corpus" --output "$run/shards" --overwrite \
  --tokenizer.vocab "$shared/vocab/bert-base-uncased-vocab.txt"

# The vocabulary named here too: tiny.ini's path is relative to a checkout beside shared/.
common=(--config configs/tiny.ini --tokenizer.vocab "$shared/vocab/bert-base-uncased-vocab.txt"
        --data.train_shards "$run/shards" --data.validation_shards "$run/shards"
        --checkpoint.dir "$run/checkpoints" --optimizer.total_steps "$steps" --checkpoint.every_steps $((steps / 4)))
rm -rf "$run/checkpoints"
say "pre-train a tiny TUPE-R for $((steps / 2)) of $steps steps on $ranks ranks (then stop, as a pre-emption would)"
"${mpirun[@]}" "$tupe" pretrain "${common[@]}" --train.max_steps $((steps / 2)) --resume auto

say "resume from the newest checkpoint and finish"
"${mpirun[@]}" "$tupe" pretrain "${common[@]}" --resume auto

last="$(ls -d "$run"/checkpoints/step_* | sort | tail -n 1)"
say "fine-tune $last on SST-2 (a quick subset: ${TUPE_QUICK_GLUE_ROWS:-4000} rows) and evaluate on its dev set"
"${mpirun[@]}" "$tupe" finetune --config configs/glue/tiny.ini --finetune.checkpoint "$last" \
  --finetune.data_dir "$shared/glue" --finetune.tasks "${TUPE_QUICK_GLUE_TASKS:-SST-2}" \
  --finetune.train_rows "${TUPE_QUICK_GLUE_ROWS:-4000}" --finetune.output_dir "$run/glue" --overwrite
# (no --tokenizer.vocab: the checkpoint carries its vocabulary; fine-tuning printed the GLUE
# table above, and it is in $run/glue/results.md)

printf '\n'
echo "made: a tiny TUPE-R pre-trained for $steps steps on $ranks ranks (stopped and resumed) and fine-tuned on ${TUPE_QUICK_GLUE_TASKS:-SST-2}"
echo "where: $run/ (shards/, checkpoints/$(basename "$last")/, glue/results.md); the executable is $tupe"
echo "next: $tupe help  |  $tupe export --checkpoint $last --output $run/hf  |  bash launch/test.sh"
