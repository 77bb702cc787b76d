#!/usr/bin/env bash
# Runs every test from a fresh machine: setup (idempotent), build, then CTest.
# Usage: launch/test.sh [--fast] [BUILD_DIR] [extra ctest args...]
#   --fast  only the unit tier (ctest -L unit; the tiers are in cmake/TupeTesting.cmake):
#           under a minute after a build. Without it, every test (what CI runs).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tier=()
if [ "${1:-}" = --fast ]; then
  tier=(-L '^unit$')
  shift
fi
build="${1:-$here/build}"
shift || true
bash "$here/launch/build.sh" "$build"
cd "$build"
ctest --output-on-failure -j "${TUPE_TEST_JOBS:-2}" "${tier[@]}" "$@"
