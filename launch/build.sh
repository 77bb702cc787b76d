#!/usr/bin/env bash
# Configures and builds tupe with CMake + Ninja (+ ccache). Runs launch/setup.sh first
# (idempotent). Usage: launch/build.sh [BUILD_DIR] (default: build).
# TUPE_BUILD_TARGET: build only this target and what it needs (the quick start: tupe).
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
# One build of this tree caches about 0.2 GB (with one shared LibTorch precompiled header);
# a few checkouts and build types fit in ccache's default 5 GB, cleaned per sub-folder, which
# then evicts entries another checkout needs. Unless the user configured a size, allow 20 GB
# (a cap: the cache only grows to what the builds put there).
if [ -z "${CCACHE_MAXSIZE:-}" ] && ccache -p 2>/dev/null | grep -q '^(default) max_size'; then
  export CCACHE_MAXSIZE=20G
fi
# A first build needs about 1 GB in its folder (the one shared LibTorch precompiled header is
# 530 MB) and 0.2 GB of ccache: refuse up front, in one line, rather than die mid-build.
if [ ! -f "$build/build.ninja" ]; then
  mkdir -p "$build"
  free_mb="$(df --output=avail -BM "$build" | tail -n 1 | tr -dc 0-9)"
  if [ -n "$free_mb" ] && [ "$free_mb" -lt 1500 ]; then
    echo "build.sh: error: $build: ${free_mb} MB free on its file system; a first build needs about 1500 MB" >&2
    exit 1
  fi
fi
if [ ! -f "$build/build.ninja" ]; then
  cmake -G Ninja -S "$here" -B "$build" \
    -DCMAKE_BUILD_TYPE="${TUPE_BUILD_TYPE:-Release}" \
    -DCMAKE_PREFIX_PATH="$TUPE_TORCH_PREFIX" \
    -DTUPE_PYTHON="$TUPE_PYTHON" ${TUPE_SHARED_DATA:+-DTUPE_SHARED_DATA="$TUPE_SHARED_DATA"} ${TUPE_CMAKE_ARGS:-}
fi
# shellcheck source=launch/heartbeat.sh
source "$here/launch/heartbeat.sh"
cmake --build "$build" -j "${TUPE_JOBS:-$(nproc)}" ${TUPE_BUILD_TARGET:+--target "$TUPE_BUILD_TARGET"} 2>&1 |
  heartbeat_lines build
