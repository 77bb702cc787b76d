#!/usr/bin/env bash
# Runs every test from a fresh machine: setup (idempotent), build, then CTest.
# Usage: launch/test.sh [BUILD_DIR] [extra ctest args...]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$here/build}"
shift || true
bash "$here/launch/build.sh" "$build"
cd "$build"
ctest --output-on-failure -j "${TUPE_TEST_JOBS:-2}" "$@"
