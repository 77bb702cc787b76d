#!/usr/bin/env bash
# Checks of the `tupe` command line: every preset in configs/ parses and validates, and bad
# input gives one error line naming the place and a non-zero exit.
# Usage: cli_checks.sh (TUPE_BIN, TUPE_SOURCE_DIR from CTest)
set -uo pipefail
fail=0
check_error() {  # $1 expected substring, rest: command
  local want="$1"; shift
  local out rc
  out="$("$@" 2>&1)"; rc=$?
  if [ $rc -eq 0 ] || ! grep -qF -- "$want" <<<"$out"; then
    echo "FAILED: '$*' exited $rc, expected an error containing '$want'; got: $out"; fail=1
  elif [ "$(grep -c 'error' <<<"$out")" -ne 1 ]; then
    echo "FAILED: '$*' printed more than one error line: $out"; fail=1
  else
    echo "ok: $want"
  fi
}
for c in "$TUPE_SOURCE_DIR"/configs/*.ini; do
  if ! "$TUPE_BIN" info --config "$c" > /dev/null; then echo "FAILED: tupe info --config $c"; fail=1; fi
done
echo "presets parse: $(ls "$TUPE_SOURCE_DIR"/configs/*.ini | wc -l)"
# The paper presets use the authors' LayerNorm epsilon (fairseq's 1e-5), not BERT's 1e-12.
for c in "$TUPE_SOURCE_DIR"/configs/*-base*.ini; do
  "$TUPE_BIN" info --config "$c" | grep -qx "layer_norm_eps = 1e-05" || { echo "FAILED: $c: layer_norm_eps is not 1e-5"; fail=1; }
done
# tupe info's parameter table for BERT-A^d (docs/model.md "BERT-A^d"): BERT-A's total plus
# U^Q, U^K with biases and the position LayerNorm, 2 (d^2 + d) + 2 d (its table replaces
# BERT-A's input position table, the same rows); at BERT-Base 110,695,482.
total_of() { "$TUPE_BIN" info --config "$TUPE_SOURCE_DIR/configs/bert-a-base.ini" "$@" | awk '$1 == "total" {print $2}'; }
bert_a="$(total_of)"
bert_ad="$(total_of --model.position_encoding bert-absolute-untied)"
d=768
if [ -n "$bert_a" ] && [ "$bert_ad" = "$((bert_a + 2 * (d * d + d) + 2 * d))" ] && [ "$bert_ad" = 110695482 ]; then
  echo "ok: tupe info: BERT-A^d $bert_ad = BERT-A $bert_a + 2 (d^2 + d) + 2 d"
else
  echo "FAILED: tupe info: BERT-A^d total '$bert_ad', want BERT-A '$bert_a' + $((2 * (d * d + d) + 2 * d))"; fail=1
fi
# RoPE, ALiBi and NoPE learn no positions: BERT-A's total less its max_positions x d input table
# (at tiny.ini's size; the BERT-Base figure, 109,119,546, is test_model's), and tupe info names each.
tiny="$TUPE_SOURCE_DIR/configs/tiny.ini"
tiny_total() { "$TUPE_BIN" info --config "$tiny" --model.untie_cls false "$@" | awk '$1 == "total" {print $2}'; }
tiny_a="$(tiny_total --model.position_encoding bert-absolute)"
tiny_d="$("$TUPE_BIN" info --config "$tiny" | awk '$1 == "hidden_size" {print $3}')"
tiny_l="$("$TUPE_BIN" info --config "$tiny" | awk '$1 == "max_positions" {print $3}')"
for pe in rope alibi none; do
  out="$("$TUPE_BIN" info --config "$tiny" --model.untie_cls false --model.position_encoding "$pe")"
  n="$(printf '%s\n' "$out" | awk '$1 == "total" {print $2}')"
  if [ -n "$tiny_a" ] && [ -n "$tiny_d" ] && [ "$n" = "$((tiny_a - tiny_l * tiny_d))" ]; then
    echo "ok: tupe info: $pe $n = BERT-A $tiny_a - $tiny_l x $tiny_d"
  else
    echo "FAILED: tupe info: $pe total '$n', want BERT-A '$tiny_a' - $tiny_l x $tiny_d"; fail=1
  fi
  printf '%s\n' "$out" | grep -q "^# parameters ($pe[,)]" || { echo "FAILED: tupe info does not name $pe"; fail=1; }
done
check_error "must be even" "$TUPE_BIN" info --config "$tiny" --model.untie_cls false \
  --model.position_encoding rope --model.num_heads 64
"$TUPE_BIN" info --config "$TUPE_SOURCE_DIR/configs/bert-ad-base.ini" | grep -q "^# parameters (bert-absolute-untied)" ||
  { echo "FAILED: tupe info does not name the BERT-A^d variant"; fail=1; }
check_error "bert-absolute-untied has none" "$TUPE_BIN" info --config "$TUPE_SOURCE_DIR/configs/bert-ad-base.ini" --model.untie_cls true
cfg="$TUPE_SOURCE_DIR/configs/tiny.ini"
check_error "model.num_heads" "$TUPE_BIN" info --config "$cfg" --model.hidden_size 63
check_error "key 'hidden_size': expected an integer" "$TUPE_BIN" info --config "$cfg" --model.hidden_size abc
check_error "position_encoding" "$TUPE_BIN" info --config "$cfg" --model.position_encoding sinusoid
# Sizes past the model's bounds are refused by key before anything is built (no int64
# overflow in max_positions + 1, no allocation of terabytes).
check_error "max_positions" "$TUPE_BIN" info --config "$cfg" --model.max_positions 9223372036854775807
check_error "hidden_size" "$TUPE_BIN" info --config "$cfg" --model.hidden_size 2147483648
check_error "relative_buckets" "$TUPE_BIN" info --config "$cfg" --model.relative_buckets 4294967296
check_error "vocab_size" "$TUPE_BIN" info --config "$cfg" --model.vocab_size 9223372036854775807
an_dir="$(mktemp -d)"
touch "$an_dir/a-file"
check_error "--seed -5: must be in [0, 4294967295]" "$TUPE_BIN" analyze --checkpoint "$an_dir" --output "$an_dir/out" --seed -5
check_error "--output $an_dir/a-file: a file, not a folder" "$TUPE_BIN" analyze --checkpoint "$an_dir" --output "$an_dir/a-file"
[ ! -e "$an_dir/out" ] || { echo "FAILED: analyze --seed -5 left $an_dir/out behind"; fail=1; }
rm -rf "$an_dir"
check_error "cannot open config file" "$TUPE_BIN" info --config /nonexistent.ini
bad="$(mktemp)"; printf '[model]\nhidden_size = 64\nbogus_key = 1\n' > "$bad"
check_error "unknown key 'bogus_key'" "$TUPE_BIN" info --config "$bad"
printf '[modle]\nhidden_size = 64\n' > "$bad"
check_error "unknown section [modle]" "$TUPE_BIN" info --config "$bad"
# ';' comments are comments (common/ini.h), like '#'.
printf '; a comment\n[model]\n  ; another\nhidden_size = 64\nnum_heads = 4\n' > "$bad"
"$TUPE_BIN" info --config "$bad" > /dev/null || { echo "FAILED: ';' comment lines refused"; fail=1; }
# fuzz/regressions/ini: a line holding Boost's placeholder made its message loop forever.
printf '[model]\n%%invalid_line%%\n' > "$bad"
check_error "line '%invalid_line%' is neither [section] nor key = value" timeout 20 "$TUPE_BIN" info --config "$bad"
# Test-only fault injection is an environment variable (TUPE_TEST_STALL), no config key.
printf '[dist]\ntest_stall_rank = 1\n' > "$bad"
check_error "unknown key 'test_stall_rank'" "$TUPE_BIN" info --config "$bad"
rm -f "$bad"
check_error "train.micro_batch_size" "$TUPE_BIN" pretrain --config "$cfg" --train.micro_batch_size -1
check_error "key 'grad_reduce' is no longer read: gradients are always summed over ranks" "$TUPE_BIN" pretrain \
  --config "$cfg" --dist.grad_reduce average
# dist.grad_scale is gone (any factor but 1 broke data-parallel exactness), in every job.
check_error "key 'grad_scale' is no longer read: the training step divides the summed gradients" "$TUPE_BIN" pretrain \
  --config "$cfg" --dist.grad_scale 1
check_error "key 'grad_scale' is no longer read" "$TUPE_BIN" finetune --dist.grad_scale 0.5
# Fine-tuning's optimizer keys moved to [optimizer] and [precision]; the old keys name the new ones.
check_error "key 'beta2' moved to [optimizer], the section pre-training reads too: set optimizer.beta2" "$TUPE_BIN" \
  finetune --finetune.beta2 0.98
check_error "set precision.precision" "$TUPE_BIN" evaluate --finetune.precision fp32
old_ft="$(mktemp)"; printf '[finetune]\ntasks = SST-2\nclip_grad_norm = 0.5\n' > "$old_ft"
check_error "$old_ft [finetune]: key 'clip_grad_norm' moved to [optimizer]" "$TUPE_BIN" finetune --config "$old_ft"
rm -f "$old_ft"
# The protocol sets optimizer.lr, warmup_steps and total_steps of each fine-tuning run.
check_error "optimizer.lr: fine-tuning sets it in every run from finetune.learning_rates" "$TUPE_BIN" finetune \
  --optimizer.lr 1e-3
check_error "optimizer.total_steps: fine-tuning sets it in every run from finetune.epochs" "$TUPE_BIN" finetune \
  --optimizer.total_steps 100
check_error "unknown subcommand" "$TUPE_BIN" pretrian
check_error "too many positional options" "$TUPE_BIN" info --config "$cfg" stray_word
# A stray carriage return in a value (a CRLF file pasted into a shell) is shown as \r, not
# obeyed by the terminal (which would overwrite the start of the line).
check_error '/nonexistent/vocab.txt\r: cannot open' "$TUPE_BIN" preprocess --config "$cfg" \
  --tokenizer.vocab $'/nonexistent/vocab.txt\r' --input "$cfg" --output "$(mktemp -u)"
# Paths in a config file are relative to the file's folder; on the command line, to the
# working directory. A config in one folder naming "vocab/v.txt" next to it, run from another.
pdir="$(mktemp -d)"; mkdir -p "$pdir/conf/vocab" "$pdir/elsewhere/vocab"
cp "${TUPE_SHARED_DATA:-$TUPE_SOURCE_DIR/../shared/data}/vocab/bert-base-uncased-vocab.txt" "$pdir/conf/vocab/v.txt"
printf 'line one of the text\nline two of the text\n' > "$pdir/text.txt"
printf '[tokenizer]\nvocab = vocab/v.txt\n[preprocess]\ndocuments = line\nvalidation_ratio = 0\n' > "$pdir/conf/p.ini"
if (cd "$pdir/elsewhere" && "$TUPE_BIN" preprocess --quiet --config ../conf/p.ini --input ../text.txt --output out > /dev/null 2>&1) &&
   [ -f "$pdir/elsewhere/out/train-00000-of-00001.h5" ] &&
   grep -qx "vocab = $(cd "$pdir" && pwd -P)/conf/vocab/v.txt" "$pdir/elsewhere/out/effective_config.ini"; then
  echo "ok: a config's relative vocab path is found next to the config (and saved absolute)"
else
  echo "FAILED: a relative path in a config file was not resolved against its folder"; fail=1
fi
# The same relative path on the command line is the working directory's (none there).
check_error "vocab/v.txt" bash -c "cd '$pdir/elsewhere' && '$TUPE_BIN' preprocess --quiet --config ../conf/p.ini \
  --tokenizer.vocab vocab/v.txt --input ../text.txt --output out2"
rm -rf "$pdir"
check_error "--mode: expected fill-mask or embeddings, got 'fill'" "$TUPE_BIN" predict --checkpoint /nonexistent --mode fill
check_error "/nonexistent: no such checkpoint folder" "$TUPE_BIN" predict --checkpoint /nonexistent --mode fill-mask
# Words of a fixed set (enums): the error names the option or key, the value and the allowed words.
check_error "--format: expected jsonl or tsv, got 'xml'" "$TUPE_BIN" predict --checkpoint /nonexistent --mode fill-mask \
  --format xml
check_error "--precision: expected fp32 or bf16, got 'fp16'" "$TUPE_BIN" predict --checkpoint /nonexistent \
  --mode fill-mask --precision fp16
check_error "key 'select_epoch': expected best or last, got 'first'" "$TUPE_BIN" finetune --finetune.select_epoch first
check_error "key 'packing': expected full_sentences or document, got 'sentences'" "$TUPE_BIN" preprocess \
  --preprocess.packing sentences --input /nonexistent --output /nonexistent
check_error "task.name: 'SST-2' is a GLUE task's name; choose another" "$TUPE_BIN" finetune --task.name SST-2
# The README's custom-task preset parses and validates (its [task] section included).
check_error "finetune.checkpoint: no pre-training checkpoint given" "$TUPE_BIN" finetune \
  --config "$TUPE_SOURCE_DIR/configs/glue/custom-sst2.ini"
check_error "finetune.tasks: unknown GLUE task 'mine'" "$TUPE_BIN" finetune --finetune.tasks mine \
  --finetune.checkpoint /nonexistent --tokenizer.vocab /nonexistent
# A config may hold other subcommands' sections (docs/config.md): their keys, values and
# ranges are checked, not what only the owning subcommand needs at run time. A pre-training
# preset, plus a partial section of every other subcommand, each without what its owner
# requires ([vocab] input and model, [tokenizer] vocab, a named [task]'s files and columns).
proj_dir="$(mktemp -d)"; proj="$proj_dir/project.ini"
cat "$TUPE_SOURCE_DIR/configs/small.ini" > "$proj"
printf '\n[vocab]\nvocab_size = 8000\nmodel_type = bpe\n[tokenizer]\nkind = wordpiece\nlower_case = true\n' >> "$proj"
printf '[task]\nname = reviews\nkind = regression\nmetrics = pearson\n[finetune]\ntasks = reviews\nbatch_size = 16\n' >> "$proj"
printf '[preprocess]\nmax_seq_len = 128\n[dist]\ntimeout_s = 600\n' >> "$proj"
# The file holds every section some subcommand reads (the list from tupe itself).
printf '[no_such_section]\nk = 1\n' > "$proj_dir/list.ini"
sections="$("$TUPE_BIN" info --config "$proj_dir/list.ini" 2>&1 | sed -n 's/.*(sections: \(.*\))$/\1/p' | tr -d ',')"
[ -n "$sections" ] || { echo "FAILED: no section list in the unknown-section error"; fail=1; }
for sec in $sections; do
  grep -qx "\[$sec\]" "$proj" || { echo "FAILED: the project config lacks a [$sec] section"; fail=1; }
done
if "$TUPE_BIN" info --config "$proj" > /dev/null 2>&1; then echo "ok: tupe info reads a config with every section"
else echo "FAILED: tupe info refuses $proj: $("$TUPE_BIN" info --config "$proj" 2>&1 | tail -1)"; fail=1; fi
# Every subcommand reaches the check of the others' sections (a bad value there is refused
# in their words) and, on the good file, gets past it: each stops at a bad value of its own.
sed -e 's/^vocab_size = 8000$/vocab_size = 3/' -e 's/^kind = regression$/kind = regression\nlabels = a,b/' "$proj" > "$proj_dir/bad.ini"
for run in "info --model.hidden_size abc" "pretrain --model.hidden_size abc" "preprocess --preprocess.seed abc" \
           "finetune --finetune.epochs abc" "evaluate --finetune.epochs abc" "vocab --vocab.seed abc"; do
  sub="${run%% *}"; own="${run#* }"
  # shellcheck disable=SC2086
  out="$("$TUPE_BIN" $sub --config "$proj" $own 2>&1)"
  if grep -q "(read by tupe" <<<"$out" || ! grep -q "expected an integer, got 'abc'" <<<"$out"; then
    echo "FAILED: tupe $sub refused another subcommand's section, or did not reach its own: $out"; fail=1
  else
    echo "ok: tupe $sub accepts the other subcommands' partial sections"
  fi
  # shellcheck disable=SC2086
  out="$("$TUPE_BIN" $sub --config "$proj_dir/bad.ini" $own 2>&1)"
  grep -q "(read by tupe .*\(vocab.vocab_size: must be .*, got 3\|task.labels: a regression task has no label values\)" \
    <<<"$out" || { echo "FAILED: tupe $sub took a bad value of another subcommand's section: $out"; fail=1; }
done
rm -rf "$proj_dir"
for sub in info preprocess pretrain finetune evaluate export predict analyze vocab; do
  help="$("$TUPE_BIN" "$sub" --help 2>&1)" || { echo "FAILED: tupe $sub --help exited non-zero"; fail=1; }
  grep -q -- "(default: " <<<"$help" || { echo "FAILED: tupe $sub --help lists no defaults"; fail=1; }
  # Test-only fault injection (TUPE_TEST_STALL, TUPE_TEST_CRASH_AFTER_FILES) is no user option.
  if grep -qiE -- "test_stall|TUPE_TEST|TEST ONLY|crash_after" <<<"$help"; then
    echo "FAILED: tupe $sub --help shows test-only fault injection"; fail=1
  fi
done
check_error "unrecognised option '--dist.test_stall_rank'" "$TUPE_BIN" pretrain --config "$cfg" --dist.test_stall_rank 1
# An unknown subcommand, option, key or section names the nearest valid ones (common/nearest.h).
check_error "unknown subcommand 'pretrian' (did you mean pretrain?" "$TUPE_BIN" pretrian
check_error "tupe help: error: unknown subcommand 'finetnue' (did you mean finetune?)" "$TUPE_BIN" help finetnue
check_error "unrecognised option '--model.hiden_size' (did you mean --model.hidden_size?; see tupe info --help)" \
  "$TUPE_BIN" info --config "$cfg" --model.hiden_size 64
near="$(mktemp)"; printf '[train]\nmax_stpes = 5\n' > "$near"
check_error "$near [train]: unknown key 'max_stpes' (did you mean train.max_steps?)" "$TUPE_BIN" pretrain --config "$near"
printf '[modle]\nhidden_size = 64\n' > "$near"
check_error "unknown section [modle]: no subcommand reads it (did you mean [model]?)" "$TUPE_BIN" info --config "$near"
rm -f "$near"
# What a bug report needs: tupe --version = tupe info --version, each fact checked against
# another source: the build's CMake cache, LibTorch's Python version file, the MPI launcher,
# HDF5's compiler wrapper, and git for the commit.
ver="$("$TUPE_BIN" --version)" || { echo "FAILED: tupe --version exited non-zero"; fail=1; }
[ "$ver" = "$("$TUPE_BIN" info --version)" ] || { echo "FAILED: tupe info --version differs from tupe --version"; fail=1; }
fact() { sed -n "s/^$1  *//p" <<<"$ver"; }
expect_fact() {  # $1 label, $2 expected value
  if [ "$(fact "$1")" = "$2" ]; then echo "ok: --version $1 $2"
  else echo "FAILED: tupe --version says $1 '$(fact "$1")', expected '$2'"; fail=1; fi
}
cache="$(dirname "$(dirname "$TUPE_BIN")")/CMakeCache.txt"
expect_fact "build type" "$(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$cache")"
torch_dir="$(sed -n 's/^Torch_DIR:[A-Z]*=//p' "$cache")"
if [ -f "$torch_dir/../../../version.py" ]; then
  expect_fact LibTorch "$(sed -n "s/^__version__ = '\([0-9.]*\).*/\1/p" "$torch_dir/../../../version.py")"
fi
if ompi="$(mpirun --version 2>/dev/null | sed -n 's/^mpirun (Open MPI) \([0-9.]*\).*/\1/p')" && [ -n "$ompi" ]; then
  expect_fact "Open MPI" "$ompi"
fi
if h5="$(h5cc -showconfig 2>/dev/null | sed -n 's/^ *HDF5 Version: *\([0-9.]*\).*/\1/p')" && [ -n "$h5" ]; then
  expect_fact HDF5 "$h5"
fi
commit="$(fact commit)"
if [ "$commit" = unknown ]; then
  ! git -C "$TUPE_SOURCE_DIR" rev-parse 2>/dev/null || { echo "FAILED: commit unknown in a git checkout"; fail=1; }
else
  hash="${commit%-dirty}"; hash="${hash##*-g}"
  if git -C "$TUPE_SOURCE_DIR" cat-file -e "$hash^{commit}" 2>/dev/null; then echo "ok: --version commit $commit"
  else echo "FAILED: tupe --version names commit '$commit', which is no commit of $TUPE_SOURCE_DIR"; fail=1; fi
fi
if [ "$(fact CUDA)" = "not compiled" ] && [ "$(fact NCCL)" != "not compiled" ]; then
  echo "FAILED: NCCL without CUDA in tupe --version"; fail=1
fi
[ $fail -eq 0 ] && echo "cli checks passed"
exit $fail
