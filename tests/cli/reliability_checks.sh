#!/usr/bin/env bash
# The inputs and faults of the break-it pass (../shared/cases/reliability, its README names
# each), run through the real `tupe`: each must end with one error line naming the file and
# the cause, a non-zero exit that is not a crash (< 128), and nothing half-written or lost.
# Usage: reliability_checks.sh (TUPE_BIN, TUPE_SOURCE_DIR, TUPE_SHARED_DATA, TUPE_SHARED_CASES,
# TUPE_MPIEXEC from CTest).
set -uo pipefail
cases="$TUPE_SHARED_CASES/reliability"
[ -d "$cases" ] || { echo "FAILED: the cases folder $cases is missing"; exit 1; }
work="$(mktemp -d)"; trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
vocab="$TUPE_SHARED_DATA/vocab/bert-base-uncased-vocab.txt"
wiki="$TUPE_SHARED_DATA/text/wikitext-2"
cfg="$TUPE_SOURCE_DIR/configs/tiny.ini"
mpirun=("$TUPE_MPIEXEC" --oversubscribe --bind-to none)
fail=0

# expect NAME WANT... -- COMMAND...: COMMAND exits 1..127, prints exactly one line with
# "error", and that line holds every WANT.
expect() {
  local name="$1"; shift
  local wants=()
  while [ "$1" != "--" ]; do wants+=("$1"); shift; done; shift
  local out rc
  out="$("$@" 2>&1)"; rc=$?
  local errs; errs="$(grep -i 'error' <<<"$out" | grep -v '^#')"
  if [ $rc -eq 0 ] || [ $rc -ge 128 ]; then
    echo "FAILED: $name: exit $rc (want 1..127); output: $out"; fail=1; return
  fi
  if [ "$(grep -c . <<<"$errs")" -ne 1 ]; then
    echo "FAILED: $name: want one error line, got: $errs"; fail=1; return
  fi
  for w in "${wants[@]}"; do
    grep -qF -- "$w" <<<"$errs" || { echo "FAILED: $name: '$w' missing from: $errs"; fail=1; return; }
  done
  echo "ok: $name: $errs"
}
P() {  # the README's pre-training recipe on given shards
  "$TUPE_BIN" pretrain --config "$cfg" --data.validation_shards '' --train.max_steps 2 --resume none \
    --checkpoint.dir "$work/p-ck" --train.progress false "$@"
}

# Good shards of real text, for the recipes that need them.
"$TUPE_BIN" preprocess --config "$cfg" --tokenizer.vocab "$vocab" --input "$wiki/wiki.test.raw" \
  --output "$work/good" --quiet > /dev/null || { echo "FAILED: preprocess of WikiText-2 test"; exit 1; }

# ---- Shards --------------------------------------------------------------------------------
f="$cases/nvidia-shape-overflow/training_shard_0.hdf5"
expect "NVIDIA shape whose element count overflows" "$f" "'input_ids'" "declares shape" -- \
  P --data.train_shards "$f" --data.vocab_size 30522 --model.type_vocab_size 2
f="$cases/own-huge-claim/train-00000-of-00001.h5"
expect "own shard declaring 2^50 tokens" "$f" "'token_ids'" "declares shape [1125899906842624]" -- P --data.train_shards "$f"
# A plausible size (10^9 tokens, 2 GB) that the file does not hold: refused before allocating.
mkdir -p "$work/claim"
cp "$work/good/train-00000-of-00002.h5" "$work/claim/train-00000-of-00001.h5"
"$TUPE_PYTHON" - "$work/claim/train-00000-of-00001.h5" <<'PY' || { echo "FAILED: h5py edit"; fail=1; }
import sys, h5py
with h5py.File(sys.argv[1], "r+") as f:
    f["token_ids"].resize((10**9,))
    f.attrs["num_shards"] = 1
PY
expect "own shard declaring more tokens than it stores" "$work/claim/train-00000-of-00001.h5" "'token_ids' declares 2000000000 bytes" \
  "file stores" -- P --data.train_shards "$work/claim"
expect "incomplete shard set" "incomplete shard set" "train-00000-of-00002.h5" -- \
  P --data.train_shards "$cases/incomplete-shard-set"
f="$cases/lzf-filter/training_shard_0.hdf5"
expect "LZF-compressed NVIDIA shard" "$f" "filter 32000" "lzf" -- \
  P --data.train_shards "$f" --data.vocab_size 30522 --model.type_vocab_size 2
f="$cases/empty-validation/validation-00000-of-00001.h5"
expect "empty validation split, refused before step 1" "$f" "hold no sequences" -- \
  "$TUPE_BIN" pretrain --config "$cfg" --data.train_shards "$work/good" --data.validation_shards "$f" \
  --train.eval_every 10 --checkpoint.every_steps 5 --checkpoint.dir "$work/ev-ck" --resume none --train.progress false
[ -z "$(ls -A "$work/ev-ck" 2>/dev/null)" ] || { echo "FAILED: the refused run wrote $work/ev-ck"; fail=1; }
# A damaged own shard (its 'format' attribute gone) is not taken for an NVIDIA one.
mkdir -p "$work/noformat"
cp "$work/good/train-00000-of-00002.h5" "$work/noformat/train-00000-of-00001.h5"
"$TUPE_PYTHON" - "$work/noformat/train-00000-of-00001.h5" <<'PY' || { echo "FAILED: h5py edit"; fail=1; }
import sys, h5py
with h5py.File(sys.argv[1], "r+") as f:
    del f.attrs["format"]
PY
expect "own shard without its format attribute" "train-00000-of-00001.h5" "without its 'format' attribute" -- \
  P --data.train_shards "$work/noformat"
# Shards of two preprocess runs (other seeds) mixed into one set of two.
"$TUPE_BIN" preprocess --config "$cfg" --tokenizer.vocab "$vocab" --input "$wiki/wiki.test.raw" \
  --preprocess.seed 2 --output "$work/other" --quiet > /dev/null || { echo "FAILED: second preprocess"; fail=1; }
mkdir -p "$work/mixed"
cp "$work/good/train-00000-of-00002.h5" "$work/other/train-00001-of-00002.h5" "$work/mixed/"
expect "shard set mixed from two runs" "incomplete shard set" "2 different preprocess runs" -- \
  P --data.train_shards "$work/mixed"

# A validation shard listed as training data (found by a break-it pass).
f="$work/good/validation-00000-of-00001.h5"
expect "validation shard given as train data" "$f" "a validation shard, listed as train data" -- P --data.train_shards "$f"

# ---- Text and config -----------------------------------------------------------------------
for t in nul ctrl; do
  f="$cases/text/$t.txt"
  expect "text file of only $t characters" "$f" "no text" -- "$TUPE_BIN" preprocess --config "$cfg" \
    --tokenizer.vocab "$vocab" --input "$f" --output "$work/out-$t" --quiet
  [ -z "$(ls -A "$work/out-$t" 2>/dev/null)" ] || { echo "FAILED: shards written for $t.txt"; fail=1; }
done
expect "a section no subcommand reads" "unknown section [glue]" "no subcommand reads it" -- \
  "$TUPE_BIN" info --config "$cases/ini/unread-section.ini"
printf '[model]\nhidden_size = 64\nnum_heads = 4\n[finetune]\nlearning_rates = fast\n' > "$work/other-section.ini"
expect "another subcommand's section is validated" "[finetune]" "learning_rates" "'fast'" -- \
  "$TUPE_BIN" info --config "$work/other-section.ini"
printf '[model]\nhidden_size = 64\nnum_heads = 4\n[finetune]\ntasks = SST-2\n' > "$work/other-ok.ini"
"$TUPE_BIN" info --config "$work/other-ok.ini" > /dev/null || { echo "FAILED: a valid [finetune] refused by info"; fail=1; }
out="$("$TUPE_BIN" info --config "$cases/ini/bom.ini" 2>&1)" \
  && echo "ok: a UTF-8 BOM is skipped" || { echo "FAILED: bom.ini: $out"; fail=1; }
expect "--config naming a folder (info)" "$work" "is a folder" -- "$TUPE_BIN" info --config "$work"
mkfifo "$work/fifo.ini"  # opening a FIFO blocked until a writer came (a hang)
expect "--config naming a FIFO" "$work/fifo.ini" "not a regular file" -- timeout 20 "$TUPE_BIN" info --config "$work/fifo.ini"
expect "--config naming a folder (preprocess)" "$work" "is a folder" -- "$TUPE_BIN" preprocess --config "$work" \
  --input "$wiki/wiki.test.raw" --output "$work/cfg-dir-out"

# ---- Faults while writing ------------------------------------------------------------------
for _ in 1 2 3 4 5 6 7 8; do cat "$wiki/wiki.test.raw"; done > "$work/big.txt"  # 10 MB of real text
# A full disk (a 300 KiB file-size limit, SIGXFSZ ignored so writes fail with EFBIG; PMIx's
# hash store, as its shared-memory store cannot start under the limit).
expect "disk full during preprocess" "tupe preprocess: error" "File too large" -- \
  env PMIX_MCA_gds=hash bash -c "trap '' XFSZ; ulimit -f 300; exec \"\$@\"" _ \
  "$TUPE_BIN" preprocess --config "$cfg" --tokenizer.vocab "$vocab" --input "$work/big.txt" \
  --output "$work/full" --quiet
left="$(ls -A "$work/full" 2>/dev/null)"
[ -z "$left" ] || { echo "FAILED: after the full disk the folder holds: $left"; fail=1; }
# SIGKILL while writing leaves a temporary file; the next run into the folder removes it.
"$TUPE_BIN" preprocess --config "$cfg" --tokenizer.vocab "$vocab" --input "$work/big.txt" \
  --output "$work/killed" --quiet > /dev/null 2>&1 &
pid=$!
for _ in $(seq 1 300); do compgen -G "$work/killed/*.tmp-*" > /dev/null && break; sleep 0.1; done
kill -9 $pid 2>/dev/null; wait $pid 2>/dev/null
if ! compgen -G "$work/killed/*.tmp-*" > /dev/null; then
  echo "FAILED: no temporary file seen before the kill"; fail=1
else
  out="$("$TUPE_BIN" preprocess --config "$cfg" --tokenizer.vocab "$vocab" --input "$wiki/wiki.test.raw" \
    --output "$work/killed" --quiet 2>&1)"
  if compgen -G "$work/killed/*.tmp-*" > /dev/null || ! grep -q "left by a writer that no longer runs" <<<"$out"; then
    echo "FAILED: stale temporary files after the rerun: $(ls "$work/killed") / $out"; fail=1
  else
    echo "ok: the rerun removed the killed run's temporary files"
  fi
fi

# ---- Ranks -----------------------------------------------------------------------------------
# Same config text, relative shard paths that reach different data from each rank's folder.
mkdir -p "$work/a" "$work/b"
ln -s "$work/good" "$work/a/shards"
ln -s "$work/other" "$work/b/shards"
common=(pretrain --config "$cfg" --data.train_shards shards --data.validation_shards '' --train.max_steps 2
        --resume none --checkpoint.dir "$work/ranks-ck" --train.progress false)
start=$SECONDS
out="$(timeout 120 "${mpirun[@]}" -np 1 --wdir "$work/a" "$TUPE_BIN" "${common[@]}" : \
       -np 1 --wdir "$work/b" "$TUPE_BIN" "${common[@]}" 2>&1)"; rc=$?
if [ $rc -eq 0 ] || [ $rc -eq 124 ] || [ "$(grep -c 'data check: rank 1 differs from rank 0 at train shard' <<<"$out")" -ne 1 ]; then
  echo "FAILED: ranks reading different shards: exit $rc: $out"; fail=1
else
  echo "ok: ranks reading different shards refused in $((SECONDS - start)) s"
fi
# preprocess ranks given different inputs write nothing.
pp=(preprocess --config "$cfg" --tokenizer.vocab "$vocab" --output "$work/pp-mixed" --quiet)
out="$(timeout 120 "${mpirun[@]}" -np 1 "$TUPE_BIN" "${pp[@]}" --input "$wiki/wiki.test.raw" : \
       -np 1 "$TUPE_BIN" "${pp[@]}" --input "$TUPE_SHARED_DATA/text/tiny-shakespeare.txt" 2>&1)"; rc=$?
if [ $rc -eq 0 ] || [ "$(grep -c 'preprocess input check: rank 1 differs from rank 0 at input 0' <<<"$out")" -ne 1 ] ||
   [ -n "$(ls -A "$work/pp-mixed" 2>/dev/null)" ]; then
  echo "FAILED: preprocess ranks with different inputs: exit $rc: $out"; fail=1
else
  echo "ok: preprocess ranks with different inputs refused, nothing written"
fi
# Under mpirun (which gives each rank a pseudo-terminal) a redirected log gets plain lines.
"${mpirun[@]}" -np 1 "$TUPE_BIN" pretrain --config "$cfg" --data.train_shards "$work/good" --data.validation_shards '' \
  --train.max_steps 2 --train.log_every 1 --resume none --checkpoint.dir "$work/log-ck" > "$work/mpirun.log" 2>&1
if ! grep -q "^step 2/2 | loss" "$work/mpirun.log" || grep -q $'[\r\x1b]' "$work/mpirun.log"; then
  echo "FAILED: the progress log under mpirun holds control codes or lacks the step lines: $(cat -A "$work/mpirun.log" | tail -5)"
  fail=1
else
  echo "ok: progress lines under mpirun are plain"
fi
# The console log (common/log.h) under mpirun: --log-ranks all tags every rank's info lines,
# debug adds each rank's placement, progress lines stay rank 0's; --log-level warn prints
# nothing on stdout; a bad TUPE_PROGRESS is one error line.
lg=(pretrain --config "$cfg" --data.train_shards "$work/good" --data.validation_shards '' --train.max_steps 2
    --train.log_every 1 --resume none)
out="$(timeout 120 "${mpirun[@]}" -np 2 "$TUPE_BIN" "${lg[@]}" --checkpoint.dir "$work/lg-ck1" --log-ranks all \
       --log-level debug 2>&1)"; rc=$?
want_one() { [ "$(grep -c -- "$1" <<<"$out")" -eq 1 ]; }
if [ $rc -ne 0 ] || ! want_one '^\[rank 0\] debug: host ' || ! want_one '^\[rank 1\] debug: host ' ||
   ! want_one '^\[rank 0\] step 2/2 | loss' || grep -q '^\[rank 1\] step ' <<<"$out" ||
   ! want_one '^\[rank 1\] pre-training finished at step 2' || grep -q '^pre-training' <<<"$out"; then
  echo "FAILED: --log-ranks all --log-level debug under mpirun: exit $rc: $out"; fail=1
else
  echo "ok: --log-ranks all tags each rank's lines, debug names each rank's placement"
fi
out="$(timeout 120 "${mpirun[@]}" -np 2 "$TUPE_BIN" "${lg[@]}" --checkpoint.dir "$work/lg-ck2" --log-level warn 2>/dev/null)"
rc=$?
if [ $rc -ne 0 ] || [ -n "$out" ] || ! compgen -G "$work/lg-ck2/step_*" > /dev/null; then
  echo "FAILED: --log-level warn: exit $rc, stdout: $out"; fail=1
else
  echo "ok: --log-level warn leaves stdout empty and the run whole"
fi
TUPE_PROGRESS=fancy expect "bad TUPE_PROGRESS" "TUPE_PROGRESS: unknown value 'fancy'" -- \
  "$TUPE_BIN" "${lg[@]}" --checkpoint.dir "$work/lg-ck3"
expect "bad --log-level" "--log-level: unknown log level 'loud'" -- "$TUPE_BIN" "${lg[@]}" --log-level loud
# preprocess ranks in different working folders given the same relative output folder.
mkdir -p "$work/wa" "$work/wb"
out="$(timeout 120 "${mpirun[@]}" -np 1 --wdir "$work/wa" "$TUPE_BIN" preprocess --config "$cfg" --tokenizer.vocab "$vocab" \
       --input "$wiki/wiki.test.raw" --output out --quiet : -np 1 --wdir "$work/wb" "$TUPE_BIN" preprocess --config "$cfg" \
       --tokenizer.vocab "$vocab" --input "$wiki/wiki.test.raw" --output out --quiet 2>&1)"; rc=$?
if [ $rc -eq 0 ] || [ "$(grep -c 'preprocess input check: rank 1 differs from rank 0 at output' <<<"$out")" -ne 1 ] ||
   compgen -G "$work/w[ab]/out/*.h5" > /dev/null; then
  echo "FAILED: preprocess ranks writing to different folders: exit $rc: $out"; fail=1
else
  echo "ok: preprocess ranks resolving the output folder differently refused"
fi
# finetune under mpirun: rank 0 cannot create its output folder (taking its lock); every rank
# ends at once with rank 0's error printed once (before: rank 1 waited for the watchdog, 600 s).
"$TUPE_BIN" pretrain --config "$cfg" --data.train_shards "$work/good" --data.validation_shards '' --train.max_steps 2 \
  --resume none --checkpoint.dir "$work/ft-ck" --checkpoint.every_steps 2 --train.progress false > /dev/null 2>&1
ck="$(ls -d "$work/ft-ck"/step_* 2>/dev/null | tail -1)"
touch "$work/not-a-folder"
start=$SECONDS
out="$(timeout 120 "${mpirun[@]}" -np 2 "$TUPE_BIN" finetune --config "$TUPE_SOURCE_DIR/configs/glue/tiny.ini" \
       --finetune.checkpoint "$ck" --finetune.data_dir "$TUPE_SHARED_DATA/glue" --finetune.tasks SST-2,RTE \
       --finetune.train_rows 64 --tokenizer.vocab "$vocab" --finetune.output_dir "$work/not-a-folder/glue" 2>&1)"; rc=$?
took=$((SECONDS - start))
if [ -z "$ck" ] || [ $rc -eq 0 ] || [ $rc -eq 124 ] || [ $took -gt 60 ] ||
   [ "$(grep -cE '^tupe finetune: (rank [0-9]: )?error: .*not-a-folder' <<<"$out")" -ne 1 ]; then
  echo "FAILED: finetune rank failure: checkpoint '$ck', exit $rc after $took s: $out"; fail=1
else
  echo "ok: finetune rank failure ended every rank in $took s, error printed once"
fi

[ $fail -eq 0 ] && echo "reliability checks passed"
exit $fail
