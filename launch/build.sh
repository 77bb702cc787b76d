#!/usr/bin/env bash
# Configures and builds tupe with CMake + Ninja (+ ccache). Runs launch/setup.sh first
# (idempotent). Usage: launch/build.sh [BUILD_DIR] (default: build).
# Environment: TUPE_JOBS (default: all cores), TUPE_BUILD_TYPE (default: Release),
# TUPE_TORCH_PREFIX (use this LibTorch instead of the pinned wheel), TUPE_SHARED_DATA (the
# real data folder the tests read; default ../shared/data beside the checkout), TUPE_CMAKE_ARGS.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$here/build}"
bash "$here/launch/setup.sh"
# shellcheck disable=SC1091
source "${TUPE_CACHE:-$HOME/.cache/tupe}/env.sh"
export CCACHE_DIR="${CCACHE_DIR:-$TUPE_CACHE/ccache}"
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$here}"  # (the CMake launcher sets it to the checkout too)
# One build of this tree caches about 2.5 GB (each library's LibTorch precompiled header is
# ~90 MB compressed); ccache's default 5 GB, cleaned per sub-folder, then evicts entries a
# second checkout needs. Unless the user configured a size, allow 20 GB.
if [ -z "${CCACHE_MAXSIZE:-}" ] && ccache -p 2>/dev/null | grep -q '^(default) max_size'; then
  export CCACHE_MAXSIZE=20G
fi
if [ ! -f "$build/build.ninja" ]; then
  cmake -G Ninja -S "$here" -B "$build" \
    -DCMAKE_BUILD_TYPE="${TUPE_BUILD_TYPE:-Release}" \
    -DCMAKE_PREFIX_PATH="$TUPE_TORCH_PREFIX" \
    -DTUPE_PYTHON="$TUPE_PYTHON" ${TUPE_SHARED_DATA:+-DTUPE_SHARED_DATA="$TUPE_SHARED_DATA"} ${TUPE_CMAKE_ARGS:-}
fi
cmake --build "$build" -j "${TUPE_JOBS:-$(nproc)}"
