#!/usr/bin/env bash
# The steps of launch/gpu_check.sh, which runs each as `bash launch/gpu_check_steps.sh STEP
# [ARGS]` under a timeout (and sources this file for `targets` and link_mpi_libs). Each
# function is one step's command: it writes to stdout/stderr (the step's log) and returns
# non-zero on failure. Sizes depend on $rehearse: on the GPU host the real sizes; in the
# rehearsal the same commands on the CPU, short. Variables (exported by gpu_check.sh): here,
# carry, build, prefix, work, logs, rehearse, device, tupe, torch_info, torch_prefix,
# torch_site.

pf() { echo "preflight: $*"; }
need() { pf "MISSING: $*"; missing=$((missing + 1)); }

preflight() {
  missing=0
  if [ -n "$torch_info" ]; then
    pf "python3 $(echo "$torch_info" | cut -d' ' -f3), torch $(echo "$torch_info" | cut -d' ' -f1) (CUDA $(echo "$torch_info" | cut -d' ' -f2))"
    [ "$(echo "$torch_info" | cut -d' ' -f2)" != None ] || need "torch is a CPU-only build (torch.version.cuda is None)"
    ls "$torch_site"/nvidia/nccl/include/nccl.h >/dev/null 2>&1 || need "NCCL headers: no $torch_site/nvidia/nccl/include/nccl.h (nvidia-nccl wheel)"
    ls "$torch_site"/nvidia/nccl/lib/libnccl.so* >/dev/null 2>&1 || need "NCCL library: no $torch_site/nvidia/nccl/lib/libnccl.so.2"
  else
    need "python3 with torch (python3 -c 'import torch' fails)"
  fi
  command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ] || need "nvcc (the CUDA toolkit) not on PATH nor in /usr/local/cuda/bin"
  command -v cmake >/dev/null || need "cmake"
  command -v ninja >/dev/null || need "ninja"
  if [ -d "$carry/debs" ] && [ -f "$carry/MANIFEST" ]; then
    pf "carried folder $carry: $(ls "$carry/debs" | wc -l) packages, $(du -sm "$carry" | cut -f1) MB"
    local f
    for f in text/wikitext-2/wiki.test.raw vocab/bert-base-uncased-vocab.txt glue/SST-2/train.tsv glue/SST-2/dev.tsv; do
      [ -f "$carry/data/$f" ] || need "carried data file $carry/data/$f"
    done
  else
    need "the carried folder $carry (debs/, data/, MANIFEST): run launch/gpu_prepare.sh and carry .gpu-carry"
  fi
  # The network, from the namespace itself: its interfaces and its routes (no host named).
  local links routes
  links=$(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | sed 's/@.*//' | tr '\n' ' ')
  [ -n "$links" ] || links=$(ls /sys/class/net 2>/dev/null | tr '\n' ' ')
  routes=$(awk 'NR > 1 && $2 == "00000000" {n++} END {print n + 0}' /proc/net/route 2>/dev/null)
  pf "network: interfaces ${links:-none}; ${routes:-0} default route(s)"
  if [ "$rehearse" = 1 ]; then
    local l
    for l in $links; do [ "$l" = lo ] || need "network isolation: interface $l besides loopback"; done
    [ "${routes:-0}" = 0 ] || need "network isolation: a default route"
    pf "rehearsal: no GPU here; mpicc/h5cc visible: $(command -v mpicc h5cc mpirun 2>/dev/null | tr '\n' ' ')"
  elif free_mib=$(nvidia-smi --query-gpu=memory.free --format=csv,noheader,nounits 2>/dev/null | head -1); then
    pf "GPU: $(nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | head -1), free ${free_mib} MiB"
    [ "${free_mib:-0}" -ge 20000 ] || need "free GPU memory: ${free_mib} MiB, the benchmarks want 20000"
    python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null || need "torch.cuda.is_available() is False"
  else
    need "a GPU: nvidia-smi fails (no driver or no device)"
  fi
  [ "$missing" -eq 0 ]
}

unpack() {
  rm -rf "$prefix" && mkdir -p "$prefix" || return 1
  local f
  for f in "$carry"/debs/*.deb; do dpkg -x "$f" "$prefix" || return 1; done
  # What Debian's alternatives would have made, plus an mpirun that finds its own libraries
  # (tupe's executables find theirs through their RPATH, so nothing else needs
  # LD_LIBRARY_PATH and the host's own programs keep the host's libraries).
  local bin="$prefix/usr/bin" lib="$prefix/usr/lib/x86_64-linux-gnu" tool
  for tool in mpirun:orterun mpiexec:orterun mpicc:mpicc.openmpi mpicxx:mpicxx.openmpi; do
    printf '#!/bin/sh\nexport OPAL_PREFIX=%s\nexport LD_LIBRARY_PATH=%s:%s/openmpi/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}\nexec %s/%s "$@"\n' \
      "$prefix/usr" "$lib" "$lib" "$bin" "${tool#*:}" > "$bin/${tool%%:*}" && chmod +x "$bin/${tool%%:*}" || return 1
  done
  echo "unpacked $(ls "$carry"/debs/*.deb | wc -l) packages into $prefix"
}

configure() {  # in place: a rerun rebuilds only what changed; no protobuf there: no TensorBoard; the host's
  # Python has no pyarrow (55 MB, over the carry's limit): no Parquet/Arrow input
  # A cache written for a checkout at another path (a tree laid anew elsewhere) is dropped.
  if [ -f "$build/CMakeCache.txt" ] && ! grep -qx "CMAKE_HOME_DIRECTORY:INTERNAL=$here" "$build/CMakeCache.txt"; then
    rm -rf "$build/CMakeCache.txt" "$build/CMakeFiles"
  fi
  cmake -G Ninja -S "$here" -B "$build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$torch_prefix" \
    -DTUPE_DEPS_PREFIX="$prefix/usr" -DTUPE_PYTHON="$(command -v python3)" -DTUPE_SHARED_DATA="$carry/data" \
    -DTUPE_TENSORBOARD=OFF -DTUPE_WITH_ARROW=OFF 2>&1 | tee "$build/cmake-configure.txt"
  [ "${PIPESTATUS[0]}" = 0 ] || return 1
  grep -q "tupe: CUDA .* compiling the GPU path" "$build/cmake-configure.txt" || {
    echo "gpu_check: CMake did not enable the CUDA/NCCL path (see the 'tupe:' lines); stopping"
    return 3
  }
}

targets=(tupe tupe_gpu_tests pretrain_unit_tests dist_unit_tests allreduce_bench variant_step_bench)
build_targets() {
  cmake --build "$build" -j "$(nproc)" --target "${targets[@]}"
}

# Debian's libmpi carries RUNPATH /usr/lib/.../openmpi/lib, which overrides the executables'
# RPATH for libmpi's own dependencies; those (Open MPI and its fabric libraries only, not the
# carried libssl/libcurl closure, so the host's Python keeps its own) go on LD_LIBRARY_PATH.
link_mpi_libs() {
  local mpi_libs="$prefix/mpi-libs" f
  mkdir -p "$mpi_libs"
  for f in "$prefix"/usr/lib/x86_64-linux-gnu/lib{mpi,open-,hwloc,event,pmix,fabric,uc,psm,ibverbs,rdmacm,nl-,munge,numa}*.so*; do
    [ -e "$f" ] && ln -sf "$f" "$mpi_libs/"
  done
  export LD_LIBRARY_PATH="$mpi_libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
}

unit_tests() {
  cd "$build" && tests/dist/dist_unit_tests --gtest_filter='DistDevicePlan.*:DistBucketAssignment.*:DistWatchdog.*' &&
    tests/pretrain/pretrain_unit_tests --gtest_filter='BatchPlan.*'
}

cuda_tier() {  # the log keeps ctest's whole -V output (gpu_figures.py ctest reads it)
  cd "$build" && ctest --output-on-failure -L gpu -V -j 4
}

preprocess() {
  local len
  for len in 128 512; do
    "$tupe" preprocess --config "$here/configs/tiny.ini" --input "$carry/data/text/wikitext-2/wiki.test.raw" \
      --tokenizer.vocab "$carry/data/vocab/bert-base-uncased-vocab.txt" --preprocess.max_seq_len $len \
      --output "$work/shards-$len" --overwrite --quiet || return 1
  done
}

# configs/small.ini (d 256, 4 layers), global batch 128 of seq 128: at this size kernel
# launches, not FLOPs, set the pace on a GPU, so its tokens/s are no MFU figure.
pretrain() {  # name position-encoding untie precision
  local size=(--precision.precision "$4" --data.global_batch_size 128 --train.max_micro_batch_size 128
              --train.max_steps 100 --train.log_every 10 --train.eval_every 100 --train.eval_batches 4)
  [ "$4" = fp16 ] && size=(--precision.precision fp16 --data.global_batch_size 128 --train.max_micro_batch_size 128
                           --train.max_steps 20 --train.log_every 5 --train.eval_every 20 --train.eval_batches 2)
  # The rehearsal: the same command on the CPU, a few steps of a small batch in fp32 (the CPU
  # has no fp16 loss scaling: tupe refuses it there).
  [ "$rehearse" = 1 ] && size=(--precision.precision fp32 --data.global_batch_size 8 --train.max_micro_batch_size 8
                               --train.max_steps 6 --train.log_every 1 --train.eval_every 6 --train.eval_batches 1)
  rm -rf "$work/ck-$1"
  mpirun -np 1 "$tupe" pretrain --config "$here/configs/small.ini" --resume none --train.device "$device" \
    --model.position_encoding "$2" --model.untie_cls "$3" \
    --data.train_shards "$work/shards-128" --data.validation_shards "$work/shards-128" \
    --train.micro_batch_size 0 --data.pad_to_max_seq_len true --optimizer.total_steps 1000 \
    --train.progress false --checkpoint.dir "$work/ck-$1" --checkpoint.every_steps 0 "${size[@]}"
}

finetune() {
  local size=()
  [ "$rehearse" = 1 ] && size=(--finetune.train_rows 64 --finetune.epochs 1)
  rm -rf "$work/ft"
  mpirun -np 1 "$tupe" finetune --config "$here/configs/glue/quick.ini" --finetune.checkpoint "$work/ck-tupe-r" \
    --finetune.tasks SST-2 --finetune.data_dir "$carry/data/glue" \
    --tokenizer.vocab "$carry/data/vocab/bert-base-uncased-vocab.txt" \
    --finetune.device "$device" --finetune.predict_test false --finetune.output_dir "$work/ft" "${size[@]}"
}

allreduce() {  # NCCL at world size 1 on the host (microseconds per call only); MPI over 2 CPU ranks in the rehearsal
  if [ "$rehearse" = 1 ]; then
    mpirun -np 2 "$build/dist/allreduce_bench" --device cpu --max_bytes 4M --iters 5
  else
    mpirun -np 1 "$build/dist/allreduce_bench" --device cuda --max_bytes 256M --iters 20
  fi
}

# BERT-Base, bf16: the four variants interleaved, on one pinned SDPA kernel and on torch's
# own choice (bench/variant_step_bench.cpp); the rehearsal: d 128, 2 layers, fp32, 3 rounds.
bench() {  # seq
  local batch=64 size=(--precision bf16 --hidden 768 --layers 12 --rounds 20 --warmup 3)
  [ "$1" = 512 ] && batch=16
  [ "$rehearse" = 1 ] && batch=4 size=(--precision fp32 --hidden 128 --layers 2 --rounds 3 --warmup 1)
  "$build/trainer/pretrain/variant_step_bench" --shards "$work/shards-$1" --device "$device" --seq "$1" \
    --batch "$batch" --sdpa both "${size[@]}"
}

# Run as a script: one step.
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  set -o pipefail
  "$@"
fi
