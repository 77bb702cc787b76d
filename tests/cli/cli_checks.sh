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
cfg="$TUPE_SOURCE_DIR/configs/tiny.ini"
check_error "model.num_heads" "$TUPE_BIN" info --config "$cfg" --model.hidden_size 63
check_error "key 'hidden_size': expected an integer" "$TUPE_BIN" info --config "$cfg" --model.hidden_size abc
check_error "position_encoding" "$TUPE_BIN" info --config "$cfg" --model.position_encoding sinusoid
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
check_error "dist.grad_reduce: average would divide by the world size twice" "$TUPE_BIN" pretrain --config "$cfg" \
  --dist.grad_reduce average
check_error "unknown subcommand" "$TUPE_BIN" pretrian
check_error "too many positional options" "$TUPE_BIN" info --config "$cfg" stray_word
for sub in info preprocess pretrain finetune evaluate export analyze vocab; do
  help="$("$TUPE_BIN" "$sub" --help 2>&1)" || { echo "FAILED: tupe $sub --help exited non-zero"; fail=1; }
  grep -q -- "(default: " <<<"$help" || { echo "FAILED: tupe $sub --help lists no defaults"; fail=1; }
  # Test-only fault injection (TUPE_TEST_STALL, TUPE_TEST_CRASH_AFTER_FILES) is no user option.
  if grep -qiE -- "test_stall|TUPE_TEST|TEST ONLY|crash_after" <<<"$help"; then
    echo "FAILED: tupe $sub --help shows test-only fault injection"; fail=1
  fi
done
check_error "unrecognised option '--dist.test_stall_rank'" "$TUPE_BIN" pretrain --config "$cfg" --dist.test_stall_rank 1
[ $fail -eq 0 ] && echo "cli checks passed"
exit $fail
