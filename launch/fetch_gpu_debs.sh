#!/usr/bin/env bash
# Downloads (without installing) the Debian 12 packages a GPU host without network needs
# to build tupe against its own torch (../shared/DEVICE.md lists them), into .debs/ of the
# checkout (ignored by git). Run on a machine with apt access; carry .debs/ to the GPU host.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
mkdir -p "$here/.debs"
cd "$here/.debs"
apt-get download libopenmpi-dev libopenmpi3 openmpi-bin openmpi-common libhwloc15 libevent-core-2.1-7 \
  libevent-pthreads-2.1-7 libpmix2 libfabric1 libucx0 libibverbs1 librdmacm1 libpsm2-2 libpsm-infinipath1 \
  libnl-3-200 libnl-route-3-200 libhdf5-dev libhdf5-103-1 libhdf5-cpp-103-1 libsz2 libaec0 \
  libboost-program-options1.74.0 libboost-program-options1.74-dev libboost1.74-dev \
  libgtest-dev googletest nlohmann-json3-dev libicu-dev libicu72 libsentencepiece-dev libsentencepiece0 \
  libssl-dev ninja-build
ls -la "$here/.debs" | tail -n +2 | wc -l
