#!/usr/bin/env bash
# Builds the libFuzzer harnesses of fuzz/ (clang, ASan + UBSan + libFuzzer, outside the
# project's CMake build) and runs each for N minutes, one at a time, from the seeds in
# fuzz/corpus/<name>/; prints per harness the executions, exec/s, final cov/ft, corpus size
# and the crashes found (files under the run folder; copy real ones to fuzz/regressions/).
#
# Usage: bash launch/fuzz.sh [MINUTES_EACH] [NAME...]   fuzz (default 10 minutes, all harnesses)
#        bash launch/fuzz.sh --regress [NAME...]        run the seeds and fuzz/regressions/<name>/*
#                                                       once each (a regression test: exit 1 if
#                                                       any input still crashes or hangs)
# Harnesses: ini tsv vocab safetensors manifest trainer_state (fuzz/fuzz_<name>.cpp).
# Exit status: 0 when every harness built and no run found a crash; 1 when a run found one
# (or a regression input still fails); 2 when a harness failed to build (the others still run).
#
# Environment:
#   TUPE_FUZZ_BUILD    build and run folder (default <repo>/build-fuzz, git-ignored by /build*/)
#   TUPE_FUZZ_MAX_LEN  -max_len (default 65536); TUPE_FUZZ_RSS_MB -rss_limit_mb (default 2048);
#   TUPE_FUZZ_TIMEOUT  -timeout in seconds per input (default 10)
#   TUPE_TORCH_PREFIX  .../torch/share/cmake (read from ~/.cache/tupe/env.sh when unset); the
#                      safetensors, manifest and trainer_state harnesses link LibTorch
# Every compile and run is `nice -n 19`, one at a time (make -j1; libFuzzer -workers=1 -jobs=1).
# The working corpus of each harness grows in $TUPE_FUZZ_BUILD/run/<name>/corpus across runs;
# fuzz/corpus/ (the seeds) is only read.
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
all=(ini tsv vocab safetensors manifest trainer_state)
needs_torch=" safetensors manifest trainer_state "

mode=fuzz
minutes=10
if [[ "${1:-}" == "--regress" ]]; then
  mode=regress
  shift
elif [[ "${1:-}" =~ ^[0-9]+$ ]]; then
  minutes=$1
  shift
elif [[ "${1:-}" == "-h" || "${1:-}" == "--help" ]]; then
  sed -n '2,27p' "${BASH_SOURCE[0]}"
  exit 0
fi
names=("$@")
[[ ${#names[@]} -eq 0 ]] && names=("${all[@]}")
for n in "${names[@]}"; do
  [[ " ${all[*]} " == *" $n "* ]] || { echo "fuzz.sh: unknown harness '$n' (harnesses: ${all[*]})" >&2; exit 2; }
done
(( minutes >= 1 )) || { echo "fuzz.sh: MINUTES_EACH must be >= 1" >&2; exit 2; }

build="${TUPE_FUZZ_BUILD:-$here/build-fuzz}"
max_len="${TUPE_FUZZ_MAX_LEN:-65536}"
rss_mb="${TUPE_FUZZ_RSS_MB:-2048}"
timeout_s="${TUPE_FUZZ_TIMEOUT:-10}"
command -v clang++ >/dev/null || { echo "fuzz.sh: clang++ not found (apt-get install clang)" >&2; exit 2; }
if [[ -z "${TUPE_TORCH_PREFIX:-}" && -f "$HOME/.cache/tupe/env.sh" ]]; then
  # shellcheck disable=SC1091
  source "$HOME/.cache/tupe/env.sh"
fi
torch=""
[[ -n "${TUPE_TORCH_PREFIX:-}" && -d "$TUPE_TORCH_PREFIX/../../include" ]] && torch="$(cd "$TUPE_TORCH_PREFIX/../.." && pwd)"

status=0
built=()
cd "$here"
for n in "${names[@]}"; do
  if [[ "$needs_torch" == *" $n "* && -z "$torch" ]]; then
    echo "fuzz.sh: $n: BUILD FAILED: LibTorch not found (set TUPE_TORCH_PREFIX)" >&2
    status=2
    continue
  fi
  echo "== build fuzz_$n"
  if nice -n 19 make --no-print-directory -j1 -f fuzz/Makefile BUILD="$build" TORCH="$torch" "$build/fuzz_$n"; then
    built+=("$n")
  else
    echo "fuzz.sh: $n: BUILD FAILED" >&2
    status=2
  fi
done

# Files a crashed harness process left under /dev/shm (its scratch folder; fuzz_util.h).
cleanup_scratch() { rm -rf "/dev/shm/tupe-fuzz-$1-"* 2>/dev/null || true; }

if [[ $mode == regress ]]; then
  for n in "${built[@]}"; do
    inputs=()
    for f in "$here/fuzz/corpus/$n"/* "$here/fuzz/regressions/$n"/*; do [[ -f "$f" ]] && inputs+=("$f"); done
    [[ ${#inputs[@]} -eq 0 ]] && continue
    echo "== regress $n: ${#inputs[@]} inputs"
    for f in "${inputs[@]}"; do
      if nice -n 19 "$build/fuzz_$n" -rss_limit_mb="$rss_mb" -timeout="$timeout_s" "$f" >"$build/regress-$n.log" 2>&1; then
        echo "  ok    ${f#"$here"/}"
      else
        echo "  FAIL  ${f#"$here"/}: $(grep -m1 -E 'ERROR: |tupe fuzz invariant|terminate called' "$build/regress-$n.log" | cut -c1-160)"
        status=$(( status > 1 ? status : 1 ))
      fi
    done
    cleanup_scratch "$n"
  done
  exit $status
fi

summary=()
for n in "${built[@]}"; do
  run="$build/run/$n"
  artifacts="$run/artifacts-$(date +%Y%m%d-%H%M%S)"
  mkdir -p "$run/corpus" "$artifacts"
  dict=()
  case $n in
    safetensors|manifest|trainer_state) dict=(-dict="$here/fuzz/dict/json.dict") ;;
    *) [[ -f "$here/fuzz/dict/$n.dict" ]] && dict=(-dict="$here/fuzz/dict/$n.dict") ;;
  esac
  echo "== fuzz $n for $minutes min (log: $run/fuzz-0.log)"
  rm -f "$run/fuzz-0.log"
  # -jobs=1 -workers=1: one fuzzing process, its output in fuzz-0.log of the working folder.
  (cd "$run" && nice -n 19 "$build/fuzz_$n" -workers=1 -jobs=1 -max_total_time=$((minutes * 60)) \
    -rss_limit_mb="$rss_mb" -malloc_limit_mb="$rss_mb" -timeout="$timeout_s" -max_len="$max_len" \
    -print_final_stats=1 -artifact_prefix="$artifacts/" "${dict[@]}" "$run/corpus" "$here/fuzz/corpus/$n") \
    >"$run/driver.log" 2>&1
  cleanup_scratch "$n"
  log="$run/fuzz-0.log"
  last=$(grep -E '^#[0-9]+' "$log" | tail -1)
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  eps=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
  [[ -z "$execs" ]] && execs=$(sed -nE 's/^#([0-9]+).*/\1/p' <<<"$last")
  cov=$(sed -nE 's/.* cov: ([0-9]+).*/\1/p' <<<"$last")
  ft=$(sed -nE 's/.* ft: ([0-9]+).*/\1/p' <<<"$last")
  corp=$(sed -nE 's/.* corp: ([0-9]+\/[0-9]+[a-zA-Z]*).*/\1/p' <<<"$last")
  files=$(find "$run/corpus" -type f | wc -l)
  mapfile -t found < <(find "$artifacts" -type f \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' \
    -o -name 'oom-*' -o -name 'slow-unit-*' \) | sort)
  crashes=0
  for f in "${found[@]}"; do [[ $(basename "$f") == slow-unit-* ]] || crashes=$((crashes + 1)); done
  if (( crashes > 0 )); then
    status=$(( status > 1 ? status : 1 ))
    what=$(grep -m1 -E '^==[0-9]+==.*ERROR|ERROR: libFuzzer|tupe fuzz invariant|terminate called' "$log" | cut -c1-160)
  fi
  summary+=("$(printf '%-14s execs=%-10s exec/s=%-6s cov=%-5s ft=%-6s corp=%-12s corpus_files=%-6s crashes=%s' \
    "$n" "${execs:-?}" "${eps:-?}" "${cov:-?}" "${ft:-?}" "${corp:-?}" "$files" "$crashes")")
  echo "${summary[-1]}"
  for f in "${found[@]}"; do echo "  ${f#"$here"/}"; done
  (( crashes > 0 )) && echo "  first report: $what"
done

echo
echo "== summary ($minutes min each; working corpora and artifacts under ${build#"$here"/}/run/)"
for line in "${summary[@]}"; do echo "$line"; done
exit $status
