#!/usr/bin/env bash
# The GPU check: builds tupe on a GPU host that brings its own PyTorch and has no network
# (../shared/DEVICE.md), runs the CUDA tier and the GPU benchmarks, and writes two files:
# summary.md (one table) and logs.tar.gz (every step's log). Prepare first, on a machine
# with apt and PyPI: launch/gpu_prepare.sh (fills .gpu-carry/, carried to the host).
#
#   launch/gpu_check.sh              on the GPU host (output: $OUT, else ./gpu-logs)
#   launch/gpu_check.sh --rehearse   on this CPU machine: the same script, in a private
#                                    mount + network namespace where the system's MPI,
#                                    HDF5, Boost, ... are hidden and there is no network,
#                                    under Python 3.12 + torch 2.11 (the host's family);
#                                    only the steps that need a GPU are skipped.
#
# Steps (each one's status and time in the table; a failing step does not stop the others,
# except that nothing runs without a build):
#   preflight   one line per missing piece: torch, CUDA device, NCCL, nvcc, cmake/ninja,
#               the carried folder, free GPU memory
#   unpack      the carried .debs into the prefix /tmp/tupe-prefix (dpkg -x)
#   configure   CMake with TUPE_DEPS_PREFIX; stops at once unless the GPU path is compiled
#   build       only the targets below (Ninja, every core)
#   unit        CPU unit tests of the pieces the GPU run relies on (device plan, batch plan)
#   cuda-tier   ctest -L gpu: CUDA vs CPU per variant, SDPA kernel, DDP/NCCL, checkpoints
#               between GPU and CPU, pretrain exactness on CUDA (skipped without a GPU)
#   allreduce   NCCL all-reduce correctness and algbw/busbw (world size 1)
#   pretrain    TUPE-R and BERT-A, bf16, small model, 100 steps each (tokens/s)
#   finetune    SST-2 from the TUPE-R checkpoint on the GPU (one LR, one seed)
#   bench-128 / bench-512   the four variants interleaved at BERT-Base size, bf16
#               (variant_step_bench): tokens/s, MFU, TUPE-R / BERT-A step time
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
carry="${TUPE_GPU_CARRY:-$here/.gpu-carry}"
out="${OUT:-$here/gpu-logs}"
prefix=/tmp/tupe-prefix
build=/tmp/tupe-build
cache="${TUPE_CACHE:-$HOME/.cache/tupe}"
rehearse=0
case "${1:-}" in
  --rehearse) rehearse=1 ;;
  "") ;;
  *) echo "usage: launch/gpu_check.sh [--rehearse]" >&2; exit 2 ;;
esac

# ---- Rehearsal: re-run this script in a namespace that looks like the GPU host ----------
if [ "$rehearse" = 1 ] && [ -z "${TUPE_REHEARSAL_INSIDE:-}" ]; then
  venv="$cache/venv-rehearse-torch-2.11.0"
  [ -x "$venv/bin/python3" ] || { echo "gpu_check: no rehearsal Python at $venv; run launch/gpu_prepare.sh" >&2; exit 1; }
  command -v unshare >/dev/null || { echo "gpu_check: --rehearse needs unshare (util-linux) and root" >&2; exit 1; }
  exec unshare --mount --net --propagation private env TUPE_REHEARSAL_INSIDE=1 PATH="$venv/bin:$PATH" \
    bash "$here/launch/hide_system_packages.sh" bash "${BASH_SOURCE[0]}" --rehearse
fi

mkdir -p "$out"
logs="$(mktemp -d /tmp/tupe-gpu-logs.XXXXXX)"
rows=()
started=$(date +%s)
record() {  # name status seconds note
  rows+=("| $1 | $2 | $3 | $4 |")
  printf '%-11s %-8s %5ss  %s\n' "$1" "$2" "$3" "$4"
}
run_step() {  # name command...: runs it into $logs/<name>.log; records ok/FAIL
  local name="$1"; shift
  local t0=$(date +%s)
  "$@" > "$logs/$name.log" 2>&1
  local rc=$?
  local dt=$(( $(date +%s) - t0 ))
  if [ $rc = 0 ]; then record "$name" ok "$dt" "${note:-}"; else record "$name" FAIL "$dt" "exit $rc; ${note:-see $name.log}"; fi
  note=""
  return $rc
}
skip_step() { record "$1" skipped 0 "$2"; }
finish() {
  {
    echo "# tupe GPU check$([ $rehearse = 1 ] && echo " (REHEARSAL on a CPU machine: GPU steps skipped)")"
    echo
    echo "$(date -u '+%F %T UTC'); total $(( $(date +%s) - started )) s; $(cat "$logs/host.txt" 2>/dev/null | tr '\n' ';')"
    echo
    echo "| step | status | s | result |"
    echo "|---|---|---|---|"
    printf '%s\n' "${rows[@]}"
  } > "$out/summary.md"
  tar -C "$logs" -czf "$out/logs.tar.gz" . 2>/dev/null
  echo "summary: $out/summary.md; logs: $out/logs.tar.gz"
  exit "${1:-0}"
}
gpu_only() {  # name: record the step as skipped in a rehearsal (true: skipped)
  if [ "$rehearse" = 1 ]; then skip_step "$1" "rehearsal: needs a GPU"; return 0; fi
  return 1
}

# ---- Preflight ----------------------------------------------------------------------------
missing=0
pf() { echo "preflight: $*" | tee -a "$logs/preflight.log"; }
need() { pf "MISSING: $*"; missing=$((missing + 1)); }
: > "$logs/preflight.log"
if torch_info=$(python3 -c 'import torch, sys; print(torch.__version__, torch.version.cuda, sys.version.split()[0])' 2>/dev/null); then
  pf "python3 $(echo "$torch_info" | cut -d' ' -f3), torch $(echo "$torch_info" | cut -d' ' -f1) (CUDA $(echo "$torch_info" | cut -d' ' -f2))"
  torch_prefix=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')
  torch_site=$(python3 -c 'import torch, os; print(os.path.dirname(os.path.dirname(torch.__file__)))')
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
  for f in text/wikitext-2/wiki.test.raw vocab/bert-base-uncased-vocab.txt glue/SST-2/train.tsv glue/SST-2/dev.tsv; do
    [ -f "$carry/data/$f" ] || need "carried data file $carry/data/$f"
  done
else
  need "the carried folder $carry (debs/, data/, MANIFEST): run launch/gpu_prepare.sh and carry .gpu-carry"
fi
if [ "$rehearse" = 1 ]; then
  pf "rehearsal: no GPU here; mpicc/h5cc visible: $(command -v mpicc h5cc mpirun 2>/dev/null | tr '\n' ' ')"
  pf "rehearsal: network $(python3 -c 'import socket; socket.create_connection(("pypi.org", 443), 3)' 2>/dev/null && echo REACHABLE || echo unreachable)"
elif free_mib=$(nvidia-smi --query-gpu=memory.free --format=csv,noheader,nounits 2>/dev/null | head -1); then
  pf "GPU: $(nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | head -1), free ${free_mib} MiB"
  [ "${free_mib:-0}" -ge 20000 ] || need "free GPU memory: ${free_mib} MiB, the benchmarks want 20000"
  python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null || need "torch.cuda.is_available() is False"
else
  need "a GPU: nvidia-smi fails (no driver or no device)"
fi
echo "$torch_info" | awk '{print "torch " $1 " CUDA " $2 " Python " $3}' > "$logs/host.txt"
[ "$rehearse" = 0 ] && nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 >> "$logs/host.txt"
if [ "$missing" -gt 0 ]; then record preflight FAIL 0 "$missing missing piece(s): see preflight.log"; finish 1; fi
record preflight ok 0 "$(echo "$torch_info" | cut -d' ' -f1)"

# ---- Unpack, configure, build ----------------------------------------------------------------
unpack() {
  rm -rf "$prefix" && mkdir -p "$prefix" || return 1
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
run_step unpack unpack || finish 1
export PATH="$prefix/usr/bin:$PATH" OPAL_PREFIX="$prefix/usr"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_ess_singleton_isolated=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_rmaps_base_oversubscribe=1
export CCACHE_DIR="${CCACHE_DIR:-$cache/ccache-gpu-check}"

configure() {  # in place: a rerun (the rehearsal's second pass) rebuilds only what changed
  cmake -G Ninja -S "$here" -B "$build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$torch_prefix" \
    -DTUPE_DEPS_PREFIX="$prefix/usr" -DTUPE_PYTHON="$(command -v python3)" -DTUPE_SHARED_DATA="$carry/data" || return 1
  grep -q "tupe: CUDA .* compiling the GPU path" "$logs/configure.log" || {
    echo "gpu_check: CMake did not enable the CUDA/NCCL path (see the 'tupe:' lines); stopping"
    return 3
  }
}
run_step configure configure || finish 1
rows[-1]="${rows[-1]% |} $(grep -h -m1 -o 'tupe: CUDA [0-9.]*' "$logs/configure.log") + NCCL: GPU path compiled |"
targets=(tupe tupe_gpu_tests pretrain_unit_tests dist_unit_tests allreduce_bench variant_step_bench)
note="${#targets[@]} targets, $(nproc) cores"
run_step build cmake --build "$build" -j "$(nproc)" --target "${targets[@]}" || finish 1
tupe="$build/cli/tupe"
# Debian's libmpi carries RUNPATH /usr/lib/.../openmpi/lib, which overrides the executables'
# RPATH for libmpi's own dependencies; those (Open MPI and its fabric libraries only, not the
# carried libssl/libcurl closure, so the host's Python keeps its own) go on LD_LIBRARY_PATH.
mpi_libs="$prefix/mpi-libs"
mkdir -p "$mpi_libs"
for f in "$prefix"/usr/lib/x86_64-linux-gnu/lib{mpi,open-,hwloc,event,pmix,fabric,uc,psm,ibverbs,rdmacm,nl-,munge,numa}*.so*; do
  [ -e "$f" ] && ln -sf "$f" "$mpi_libs/"
done
export LD_LIBRARY_PATH="$mpi_libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

# ---- Tests -----------------------------------------------------------------------------------
note="device plan, batch plan, buckets"
run_step unit bash -c "cd '$build' && tests/dist/dist_unit_tests --gtest_filter='DistDevicePlan.*:DistBucketAssignment.*' &&
  tests/pretrain/pretrain_unit_tests --gtest_filter='BatchPlan.*'"
cuda_tier() {
  cd "$build" && ctest --output-on-failure -L gpu -V 2>&1 | tee "$logs/cuda-tier-verbose.txt" |
    grep -E "Test +#|tests passed|Skipped|Failed|SDPA backend|CUDA vs|DDP \(NCCL|exactness|^tupe GPU" | tail -80
  grep -q "100% tests passed" "$logs/cuda-tier-verbose.txt"
}
run_step cuda-tier cuda_tier
tier=$(grep -E "tests passed|tests failed" "$logs/cuda-tier-verbose.txt" | tail -1)
skipped=$(grep -c "\*\*\*Skipped" "$logs/cuda-tier-verbose.txt")
rows[-1]="${rows[-1]% |} $tier; $skipped skipped |"

# ---- GPU runs -------------------------------------------------------------------------------
if ! gpu_only allreduce; then
  run_step allreduce mpirun -np 1 "$build/dist/allreduce_bench" --device cuda --max_bytes 256M --iters 20
  rows[-1]="${rows[-1]% |} $(grep -Ei 'wrong|busbw' "$logs/allreduce.log" | tail -2 | tr '\n' ' ') |"
fi

shards128=/tmp/tupe-shards-128 shards512=/tmp/tupe-shards-512
preprocess() {
  for len in 128 512; do
    "$tupe" preprocess --config "$here/configs/tiny.ini" --input "$carry/data/text/wikitext-2/wiki.test.raw" \
      --tokenizer.vocab "$carry/data/vocab/bert-base-uncased-vocab.txt" --preprocess.max_seq_len $len \
      --output "/tmp/tupe-shards-$len" --overwrite --quiet || return 1
  done
}
run_step preprocess preprocess

pretrain() {  # name position-encoding untie
  rm -rf "/tmp/ck-$1"
  mpirun -np 1 "$tupe" pretrain --config "$here/configs/small.ini" --resume none --train.device cuda \
    --precision.precision bf16 --model.position_encoding "$2" --model.untie_cls "$3" \
    --data.train_shards "$shards128" --data.validation_shards "$shards128" --data.global_batch_size 128 \
    --train.micro_batch_size 0 --train.max_micro_batch_size 128 --data.pad_to_max_seq_len true \
    --train.max_steps 100 --optimizer.total_steps 1000 --train.log_every 10 --train.eval_every 100 \
    --train.eval_batches 4 --train.progress false --checkpoint.dir "/tmp/ck-$1" --checkpoint.every_steps 0
}
tokens_per_s() {  # metrics file: mean tokens/s after the first two records
  python3 -c 'import json,sys; r=[json.loads(l) for l in open(sys.argv[1])]; t=[x["tokens_per_s"] for x in r if "tokens_per_s" in x][2:]; v=[x["validation_loss"] for x in r if "validation_loss" in x]; print(f"{sum(t)/max(len(t),1):.0f} tokens/s, last loss {[x for x in r if \"loss\" in x][-1][\"loss\"]:.3f}, validation {v[-1] if v else None}")' "$1" 2>/dev/null
}
for v in "tupe-r tupe-relative true" "bert-a bert-absolute false"; do
  set -- $v
  if ! gpu_only "pretrain-$1"; then
    run_step "pretrain-$1" pretrain "$1" "$2" "$3"
    rows[-1]="${rows[-1]% |} $(tokens_per_s "/tmp/ck-$1/metrics/rank_0.jsonl") |"
  fi
done

finetune() {
  rm -rf /tmp/tupe-ft
  mpirun -np 1 "$tupe" finetune --config "$here/configs/glue/quick.ini" --finetune.checkpoint /tmp/ck-tupe-r \
    --finetune.tasks SST-2 --finetune.data_dir "$carry/data/glue" --tokenizer.vocab "$carry/data/vocab/bert-base-uncased-vocab.txt" \
    --finetune.device cuda --finetune.predict_test false --finetune.output_dir /tmp/tupe-ft
}
if ! gpu_only finetune; then
  run_step finetune finetune
  rows[-1]="${rows[-1]% |} $(grep -iE 'SST-2' "$logs/finetune.log" | tail -1 | cut -c1-120) |"
fi

# BERT-Base, bf16: the four variants interleaved; tokens/s and MFU from the median step.
bench() {  # seq batch
  "$build/trainer/pretrain/variant_step_bench" --shards "/tmp/tupe-shards-$1" --device cuda --precision bf16 \
    --hidden 768 --layers 12 --seq "$1" --batch "$2" --rounds 20 --warmup 3
}
mfu_note() {  # seq batch log: tokens/s, MFU (FLOPs as executed: encoder over L, MLM head on 15% of tokens, x3; 989 TFLOP/s bf16 peak)
  python3 - "$@" <<'PY'
import re, sys
seq, batch, path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
d, layers, V, peak = 768, 12, 30522, 989e12
fwd = layers * (24 * d * d + 4 * seq * d) + 0.15 * (2 * d * d + 2 * d * V)
rows = {m.group(1): (float(m.group(2)), float(m.group(3))) for m in
        re.finditer(r"^(\S+)\s+([\d.]+)\s+[\d.]+\s+([\d.]+)\s*$", open(path).read(), re.M)}
out = []
for name in ("tupe-relative", "bert-absolute"):
    if name in rows:
        tps = seq * batch / rows[name][0]
        out.append(f"{name} {tps:,.0f} tok/s MFU {3 * fwd * tps / peak:.1%}")
if "tupe-relative" in rows:
    out.append(f"TUPE-R/BERT-A {rows['tupe-relative'][1]:.3f}")
print("; ".join(out) or "no result")
PY
}
for cfg in "128 64" "512 16"; do
  set -- $cfg
  if ! gpu_only "bench-$1"; then
    run_step "bench-$1" bench "$1" "$2"
    rows[-1]="${rows[-1]% |} $(mfu_note "$1" "$2" "$logs/bench-$1.log") |"
  fi
done

failed=$(printf '%s\n' "${rows[@]}" | grep -c "| FAIL |")
finish $(( failed > 0 ? 1 : 0 ))
