#!/usr/bin/env bash
# Sanitizer builds of the unit tests (run by hand; not part of launch/test.sh):
#   asan  AddressSanitizer + UndefinedBehaviorSanitizer (-fno-sanitize-recover: the first
#         report fails the test) over the single-process unit tests of every library;
#   tsan  ThreadSanitizer over the data and dist tests: the loader's worker threads, the
#         on-demand shard readers and their block cache, the watchdog, the gradient buckets' autograd hooks, and the multi-rank dist tests.
# LibTorch, MPI and HDF5 are not instrumented (reports inside them are not ours: TSan gets a
# suppression file for their internal threads, launch/tsan.supp); OMP_NUM_THREADS=1.
# Usage: launch/sanitize.sh [asan|tsan|all] (default all). Builds in build-asan/ and
# build-tsan/ (git-ignored). Exits non-zero when a build fails or any sanitizer reports.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
what="${1:-all}"
bash "$here/launch/setup.sh"
# shellcheck disable=SC1091
source "${TUPE_CACHE:-$HOME/.cache/tupe}/env.sh"
export CCACHE_DIR="${CCACHE_DIR:-$TUPE_CACHE/ccache}" OMP_NUM_THREADS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
status=0

configure_and_build() {  # $1 folder, $2 sanitizer flags, rest: targets
  local dir="$1" flags="$2"; shift 2
  if [ ! -f "$dir/build.ninja" ]; then
    cmake -G Ninja -S "$here" -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DCMAKE_PREFIX_PATH="$TUPE_TORCH_PREFIX" -DTUPE_PYTHON="$TUPE_PYTHON" \
      -DCMAKE_CXX_FLAGS="$flags -fno-omit-frame-pointer" -DCMAKE_C_FLAGS="$flags -fno-omit-frame-pointer" \
      -DCMAKE_EXE_LINKER_FLAGS="$flags" -DCMAKE_SHARED_LINKER_FLAGS="$flags" ${TUPE_CMAKE_ARGS:-}
  fi
  cmake --build "$dir" -j "${TUPE_JOBS:-$(nproc)}" --target "$@"
}

run_tests() {  # $1 label, rest: test executables (relative to the build folder $dir)
  local label="$1"; shift
  local failed=0 exe
  for exe in "$@"; do
    local log="$dir/sanitize-$(basename "$exe").log"
    if (cd "$dir" && "$exe" --gtest_brief=1 --gtest_color=no > "$log" 2>&1); then
      echo "  $(basename "$exe"): $(grep -E '^\[  PASSED  \]' "$log" | tail -1)"
    else
      echo "  $(basename "$exe"): FAILED (log: $log)"; tail -40 "$log"; failed=1
    fi
  done
  if [ $failed -ne 0 ]; then echo "sanitize: $label: FAILED"; status=1; else echo "sanitize: $label: clean"; fi
}
# What CTest gives every test (cmake/TupeTesting.cmake).
export TUPE_SHARED_DATA="$here/../shared/data" TUPE_PYTHON TUPE_SOURCE_DIR="$here"

if [ "$what" = asan ] || [ "$what" = all ]; then
  configure_and_build "$here/build-asan" "-fsanitize=address,undefined -fno-sanitize-recover=undefined" \
    data_unit_tests data_shard_tests dist_unit_tests pretrain_unit_tests test_model test_text test_vocab_train tupe_trainer_tests \
    checkpoint_unit_tests finetune_unit_tests dist_abort_tests tupe
  # detect_leaks=0: LibTorch's and MPI's process-lifetime allocations are not freed at exit.
  export ASAN_OPTIONS="detect_leaks=0:abort_on_error=1:strict_string_checks=1:check_initialization_order=1"
  export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
  dir="$here/build-asan" TUPE_BIN="$here/build-asan/cli/tupe"
  export TUPE_BIN
  run_tests "ASan+UBSan unit tests" tests/data/data_unit_tests tests/data/data_shard_tests tests/dist/dist_unit_tests \
    tests/pretrain/pretrain_unit_tests tests/model/test_model tests/text/test_text tests/text/test_vocab_train tests/trainer/tupe_trainer_tests \
    tests/checkpoint/checkpoint_unit_tests tests/finetune/finetune_unit_tests tests/dist/dist_abort_tests
  unset ASAN_OPTIONS UBSAN_OPTIONS
fi

if [ "$what" = tsan ] || [ "$what" = all ]; then
  configure_and_build "$here/build-tsan" "-fsanitize=thread" data_unit_tests data_shard_tests dist_unit_tests \
    dist_mpi_tests
  export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$here/launch/tsan.supp"
  dir="$here/build-tsan"
  run_tests "TSan data and dist tests" tests/data/data_unit_tests tests/dist/dist_unit_tests
  # On-demand shard reading from several threads (block cache, pread sources); the CLI tests of
  # that binary need the tupe executable, which this build does not make.
  export GTEST_FILTER='DataOnDemand*:DataShards*:DataNvidia*:DataCorpus*'
  run_tests "TSan shard readers" tests/data/data_shard_tests
  unset GTEST_FILTER
  # The multi-rank dist tests (collectives, DDP buckets and hooks, consistency) on 2 ranks.
  if (cd "$dir" && mpirun -np 2 --oversubscribe --bind-to none tests/dist/dist_mpi_tests --gtest_brief=1 --gtest_color=no \
        > "$dir/sanitize-dist_mpi_tests.log" 2>&1); then
    echo "  dist_mpi_tests (2 ranks): $(grep -E '^\[  PASSED  \]' "$dir/sanitize-dist_mpi_tests.log" | tail -1)"
  else
    echo "  dist_mpi_tests (2 ranks): FAILED"; tail -40 "$dir/sanitize-dist_mpi_tests.log"; status=1
  fi
  unset TSAN_OPTIONS
fi
exit $status
