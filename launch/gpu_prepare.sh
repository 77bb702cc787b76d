#!/usr/bin/env bash
# Gathers everything a GPU host without network needs for launch/gpu_check.sh into ONE
# ignored folder of the checkout, .gpu-carry/ (at most 60 MB), and prepares this machine's
# stand-in for that host (for `launch/gpu_check.sh --rehearse`). Needs apt and pip (their
# package indexes); run it here, then send .gpu-carry/ to the GPU host with the checkout
# (docs/gpu-check.md), where `bash launch/gpu_check.sh` is the whole check.
#
#   .gpu-carry/debs/   Debian 12 packages: Open MPI, serial HDF5, Boost.Program_options,
#                      GoogleTest, nlohmann-json, ICU, SentencePiece, OpenSSL headers, spdlog/fmt, and
#                      the libraries they load that a minimal host may lack (the closure of
#                      their DT_NEEDED entries, less glibc, libstdc++, libgcc and zlib)
#   .gpu-carry/data/   the real data the checks read, laid out as ../shared/data:
#                      WikiText-2 test split (1.3 MB), the BERT uncased vocabulary, SST-2 rows
#   .gpu-carry/MANIFEST  what is there, with sizes
# The stand-in (not carried): $TUPE_CACHE/venv-rehearse-torch-2.11.0, Python 3.12 with
# torch 2.11.0 (the host's version family: torch 2.11.0+cu130 under Python 3.12) and numpy.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
carry="${TUPE_GPU_CARRY:-$here/.gpu-carry}"
shared="${TUPE_SHARED_DATA:-$here/../shared/data}"
cache="${TUPE_CACHE:-$HOME/.cache/tupe}"
HOST_TORCH=2.11.0
HOST_PYTHON=3.12
DEBS=(
  # Open MPI and what its libraries and plugins load
  libopenmpi-dev libopenmpi3 openmpi-bin openmpi-common libhwloc15 libevent-core-2.1-7 libevent-pthreads-2.1-7
  libpmix2 libfabric1 libucx0 libibverbs1 ibverbs-providers librdmacm1 libpsm2-2 libpsm-infinipath1
  libnl-3-200 libnl-route-3-200 libmunge2 libnuma1 libatomic1
  # serial HDF5 and what it loads (libcurl and its closure)
  libhdf5-dev libhdf5-103-1 libhdf5-cpp-103-1 libsz2 libaec0 libcurl4 libbrotli1 libgssapi-krb5-2 libidn2-0
  libk5crypto3 libkrb5-3 libkrb5support0 libldap-2.5-0 libnghttp2-14 libpsl5 librtmp1 libsasl2-2 libssh2-1
  libgnutls30 libhogweed6 libnettle8 libgmp10 libp11-kit0 libtasn1-6 libunistring2 libffi8 libzstd1
  libcom-err2 libkeyutils1
  # Boost.Program_options, tests, JSON, ICU, SentencePiece, OpenSSL
  libboost-program-options1.74.0 libboost-program-options1.74-dev libboost1.74-dev
  libgtest-dev nlohmann-json3-dev libicu-dev libicu72 libsentencepiece-dev libsentencepiece0 libssl-dev libssl3
  # the console log
  libspdlog-dev libspdlog1.10 libfmt-dev libfmt9
  # gzip and zstd corpora of tupe preprocess (headers; the libraries are libzstd1 above and the host's zlib)
  zlib1g-dev libzstd-dev
)
limit_mb=60

log() { echo "[gpu_prepare] $*"; }
rm -rf "$carry.new"
mkdir -p "$carry.new/debs" "$carry.new/data/text/wikitext-2" "$carry.new/data/vocab" "$carry.new/data/glue/SST-2"

log "downloading ${#DEBS[@]} Debian packages"
SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
if ! (cd "$carry.new/debs" && apt-get download "${DEBS[@]}" >/dev/null 2>&1); then
  $SUDO apt-get update -qq
  (cd "$carry.new/debs" && apt-get download "${DEBS[@]}" >/dev/null)
fi

log "copying real data from $shared"
for f in text/wikitext-2/wiki.test.raw vocab/bert-base-uncased-vocab.txt glue/SST-2/dev.tsv; do
  [ -f "$shared/$f" ] || { echo "gpu_prepare: $shared/$f: missing (TUPE_SHARED_DATA?)" >&2; exit 1; }
  cp "$shared/$f" "$carry.new/data/$f"
done
head -n 4001 "$shared/glue/SST-2/train.tsv" > "$carry.new/data/glue/SST-2/train.tsv"  # header + 4000 rows

{
  echo "# .gpu-carry, written by launch/gpu_prepare.sh on $(date -u +%F)"
  (cd "$carry.new" && find . -type f ! -name MANIFEST -printf '%s %p\n' | sort -k2)
} > "$carry.new/MANIFEST"
size_mb=$(du -sm "$carry.new" | cut -f1)
if [ "$size_mb" -gt "$limit_mb" ]; then
  echo "gpu_prepare: $carry.new is $size_mb MB, over the $limit_mb MB limit" >&2
  exit 1
fi
rm -rf "$carry"
mv "$carry.new" "$carry"
log "carry folder $carry: $size_mb MB ($(ls "$carry/debs" | wc -l) packages)"

# This machine's stand-in for the GPU host's Python (the rehearsal runs under it).
venv="$cache/venv-rehearse-torch-$HOST_TORCH"
if [ ! -f "$venv/.tupe-ok" ]; then
  py=""
  for c in "python$HOST_PYTHON" "$HOME/.pyenv/versions/$HOST_PYTHON"*/bin/python3; do
    if command -v "$c" >/dev/null 2>&1 && "$c" -c "import sys; assert sys.version_info[:2] == (3, ${HOST_PYTHON#3.})" 2>/dev/null; then
      py="$c"
      break
    fi
  done
  [ -n "$py" ] || { echo "gpu_prepare: no Python $HOST_PYTHON here for the rehearsal's stand-in" >&2; exit 1; }
  log "creating $venv (Python $HOST_PYTHON, torch==$HOST_TORCH, about 5 GB, once)"
  rm -rf "$venv"
  "$py" -m venv "$venv"
  "$venv/bin/pip" install -q "torch==$HOST_TORCH" numpy safetensors
  touch "$venv/.tupe-ok"
fi
log "rehearsal Python: $("$venv/bin/python" -c 'import sys, torch; print(sys.version.split()[0], "torch", torch.__version__)' 2>/dev/null)"
