#!/usr/bin/env bash
# The GPU check: builds tupe on a GPU host that brings its own PyTorch and has no network
# (README "Using a machine's own LibTorch"), runs the CUDA tier and the GPU benchmarks, and
# brings back what ran: after EVERY step it rewrites, in $OUT, summary.md (the table, with
# the device plan), steps.tsv and logs-<part>.tar.gz (every step's log), so a call cut at
# its limit still returns the steps it finished. Prepare first, on a machine with apt and
# pip: launch/gpu_prepare.sh (fills .gpu-carry/, carried to the host).
#
#   launch/gpu_check.sh --part build   on the GPU host, device call 1: unpack, configure,
#                                      build, unit, cuda-tier
#   launch/gpu_check.sh --part bench   on the GPU host, device call 2: the benchmarks (it
#                                      first rebuilds, from the carried tree, if the machine
#                                      came back fresh and build-gpu/ is gone)
#   launch/gpu_check.sh --rehearse     here, both parts: the same script in a private mount +
#                                      network namespace where the system's MPI, HDF5,
#                                      Boost, ... are hidden and there is no network, under
#                                      Python 3.12 + torch 2.11 (the host's family); the GPU
#                                      steps run as short CPU runs of the same commands, so
#                                      every row that a CPU can rehearse has its figures. The
#                                      compile is cold (every object compiled, as on the host),
#                                      so its time, scaled to 16 cores, plans the device calls
#                                      (TUPE_REHEARSE_CCACHE=1 takes the objects from the cache
#                                      the cold run filled, for quick reruns).
#
# The two device calls (the device tool's `run`; at most 600 s each, 15 min of device time in
# all, start-up included; the build folder build-gpu/ is an ignored path of the checkout,
# kept between calls while the machine stays warm):
#   call 1: command "bash launch/gpu_check.sh --part build"             carry [".gpu-carry"]  timeout_s 600
#   call 2: command "bash launch/gpu_check.sh --part bench --deadline D"  carry [".gpu-carry"]  timeout_s D+30
#           with D = the device tool's status budget_left_s minus 60 (at most 540)
# Each part stops starting steps 30 s before its deadline (--deadline, default 540 s after it
# started) and runs each step under a timeout of its budget (below) or what is left.
#
# Steps (status, time and figures of each in the table; a failing step does not stop the
# others, except that nothing runs without a build). kind: how its time moves to the host.
#   part   step        kind      budget  what
#   build  preflight   serial      15    one line per missing piece: torch, GPU, NCCL, nvcc,
#                                        cmake/ninja, the carried folder, free GPU memory;
#                                        in a rehearsal: the namespace has no network
#   build  unpack      serial      30    the carried .debs into build-gpu/prefix (dpkg -x)
#   build  configure   serial      60    CMake; stops at once unless the GPU path is compiled
#   build  build       parallel   450    the targets (Ninja, every core; a cap, not a guess:
#                                        the cold rehearsal took 944 CPU-s, i.e. ~80 s on 16
#                                        cores at 75% efficiency; its contended wall time,
#                                        3411 s on 2 cores, scales to 426 s)
#   build  unit        serial      30    CPU unit tests the GPU run relies on
#   build  cuda-tier   gpu        120    ctest -L gpu (CUDA vs CPU, SDPA kernels and the cuDNN
#                                        NaN lengths, DDP over NCCL, checkpoints, exactness)
#   bench  rebuild     parallel   400    nothing to do when build-gpu/ survived; else unpack,
#                                        configure and build again
#   bench  preprocess  serial      30    WikiText-2 test split into shards of 128 and 512
#   bench  bench-128   gpu         60    variant_step_bench, BERT-Base, bf16, seq 128 x 64:
#                                        tokens/s, MFU, TUPE-R / BERT-A, SDPA pinned and default
#   bench  pretrain-tupe-r / pretrain-bert-a  gpu  45 each   small model, bf16, 100 steps
#   bench  allreduce   gpu         30    NCCL all-reduce, world size 1: correctness, busbw
#   bench  bench-512   gpu         60    the same at seq 512 x 16
#   bench  finetune    gpu         60    SST-2 from the TUPE-R checkpoint
# The figures come from launch/gpu_figures.py; the rehearsal runs it on its CPU runs' files.
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
carry="${TUPE_GPU_CARRY:-$here/.gpu-carry}"
cache="${TUPE_CACHE:-$HOME/.cache/tupe}"
rehearse=0 part="" deadline_s=540
while [ $# -gt 0 ]; do
  case "$1" in
    --rehearse) rehearse=1 ;;
    --part) part="${2:-}"; shift ;;
    --deadline) deadline_s="${2:-}"; shift ;;
    *) echo "usage: launch/gpu_check.sh --part build|bench [--deadline S] | --rehearse" >&2; exit 2 ;;
  esac
  shift
done
if [ "$rehearse" = 1 ]; then part="${part:-all}"; fi
case "$part" in
  build|bench|all) ;;
  *) echo "gpu_check: --part build|bench (or --rehearse); see the header of launch/gpu_check.sh" >&2; exit 2 ;;
esac
[[ "$deadline_s" =~ ^[0-9]+$ ]] || { echo "gpu_check: --deadline: '$deadline_s' is not a number of seconds" >&2; exit 2; }

# ---- Rehearsal: re-run this script in a namespace that looks like the GPU host ----------
if [ "$rehearse" = 1 ] && [ -z "${TUPE_REHEARSAL_INSIDE:-}" ]; then
  venv="$cache/venv-rehearse-torch-2.11.0"
  [ -x "$venv/bin/python3" ] || { echo "gpu_check: no rehearsal Python at $venv; run launch/gpu_prepare.sh" >&2; exit 1; }
  command -v unshare >/dev/null || { echo "gpu_check: --rehearse needs unshare (util-linux) and root" >&2; exit 1; }
  exec unshare --mount --net --propagation private env TUPE_REHEARSAL_INSIDE=1 PATH="$venv/bin:$PATH" \
    bash "$here/launch/hide_system_packages.sh" bash "${BASH_SOURCE[0]}" --rehearse --part "$part" --deadline 0
fi

if [ "$rehearse" = 1 ]; then build="$here/build-gpu-rehearse"; deadline_s=0; else build="$here/build-gpu"; fi
out="${OUT:-$build/out}"
prefix="$build/prefix" work="$build/work" logs="$build/logs/$part"
mkdir -p "$out" "$work" "$logs" || exit 1
steps="$build/logs/steps.tsv"
[ "$part" = bench ] || : > "$steps"  # call 2 appends to call 1's rows when build-gpu/ survived
started=$(date +%s)
figures() { python3 "$here/launch/gpu_figures.py" "$@" 2>&1 | tail -1; }

publish() {  # the summary and the logs so far, into $OUT (after every step, and at exit)
  local title="tupe GPU check"
  [ "$rehearse" = 1 ] && title="tupe GPU check: REHEARSAL on a CPU machine (GPU steps as short CPU runs)"
  python3 "$here/launch/gpu_figures.py" summary "$steps" --title "$title" --here-cores "$(nproc)" \
    --host-cores "${TUPE_HOST_CORES:-16}" --note "$(date -u '+%F %T UTC'); $(tr '\n' ';' < "$logs/../host.txt" 2>/dev/null)" \
    > "$out/summary.md.new" 2> "$logs/summary-error.txt" && mv "$out/summary.md.new" "$out/summary.md"
  cp "$steps" "$out/steps.tsv" 2>/dev/null
  tar -C "$build/logs" -czf "$out/logs-$part.tar.gz.new" . 2>/dev/null && mv "$out/logs-$part.tar.gz.new" "$out/logs-$part.tar.gz"
}
on_exit() { local rc=$?; publish; echo "gpu_check: summary $out/summary.md; logs $out/logs-$part.tar.gz"; exit $rc; }
trap on_exit EXIT
trap 'echo "gpu_check: stopped by a signal" >> "$logs/stopped.txt"; exit 143' TERM INT HUP

record() {  # part step status seconds kind budget cpu-seconds result
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$@" >> "$steps"
  printf '%-6s %-16s %-8s %5ss  %s\n' "$1" "$2" "$3" "$4" "$8"
  publish
}
read_children_cpu() {  # cpu_now = user + system seconds of this shell's finished children
  times > "$logs/.times"  # called without $(...): bash's `times` of this very shell (2nd line: children)
  cpu_now=$(tail -1 "$logs/.times" | awk '{ s = 0; for (i = 1; i <= 2; ++i) { split($i, p, /[ms]/); s += p[1] * 60 + p[2] } printf "%.0f", s }')
}
left_s() { [ "$deadline_s" = 0 ] && echo 100000 || echo $(( deadline_s - 30 - ($(date +%s) - started) )); }
step_part=""  # the part a step belongs to (set by each section)
run_step() {  # name kind budget command...: runs it into $logs/<name>.log under a timeout
  local name="$1" kind="$2" budget="$3"; shift 3
  local left; left=$(left_s)
  last_seconds=0 last_cpu=0 last_kind=$kind last_budget=$budget last_name=$name
  if [ "$left" -lt 10 ]; then last_status=skipped; return 1; fi
  local limit=$(( budget < left ? budget : left )) t0 rc
  [ "$rehearse" = 1 ] && limit=100000  # a CPU rehearsal takes as long as it takes; the plan scales it
  read_children_cpu
  local c0=$cpu_now
  t0=$(date +%s)
  timeout --kill-after=10 "$limit" bash "$here/launch/gpu_check_steps.sh" "$@" > "$logs/$name.log" 2>&1
  rc=$?
  local dt=$(( $(date +%s) - t0 ))
  read_children_cpu
  last_cpu=$(( cpu_now - c0 ))
  if [ $rc = 0 ]; then status=ok; elif [ $rc = 124 ] || [ $rc = 137 ]; then status=TIMEOUT; else status=FAIL; fi
  last_status=$status last_seconds=$dt
  [ $rc = 0 ]
}
finish_step() {  # result text: records the step run_step ran last
  local result="$1"
  # A step that ran but whose figures could not be read is no success.
  if [ "$last_status" = ok ] && [[ "$result" == figures:* ]]; then last_status=NO-FIGURES; fi
  if [ "$last_status" = skipped ]; then
    result="no time left before the deadline"
  elif [ "$last_status" != ok ]; then
    result="$last_status (see $last_name.log)${1:+; $1}"
  fi
  record "$step_part" "$last_name" "$last_status" "$last_seconds" "$last_kind" "$last_budget" "$last_cpu" "$result"
}

# ---- Environment: what the host (or its stand-in) offers ------------------------------------
export PATH="$prefix/usr/bin:$PATH" OPAL_PREFIX="$prefix/usr"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_ess_singleton_isolated=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_rmaps_base_oversubscribe=1
if [ "$rehearse" = 1 ]; then
  # Cold by default (every object compiled, as on the host, and so timed), but stored, so that
  # TUPE_REHEARSE_CCACHE=1 reruns take it from the cache.
  export CCACHE_DIR="${CCACHE_DIR:-$cache/ccache-gpu-check}"
  [ "${TUPE_REHEARSE_CCACHE:-0}" = 1 ] || export CCACHE_RECACHE=1
else
  export CCACHE_DISABLE=1  # whatever ccache the host may have is empty: compile straight
fi
cold=$([ "${TUPE_REHEARSE_CCACHE:-0}" = 1 ] && [ "$rehearse" = 1 ] && echo "ccache (warm rerun: not a cold time)" || echo "cold")
torch_info=$(python3 -c 'import torch, sys; print(torch.__version__, torch.version.cuda, sys.version.split()[0])' 2>/dev/null)
torch_prefix=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)' 2>/dev/null)
torch_site=$(python3 -c 'import torch, os; print(os.path.dirname(os.path.dirname(torch.__file__)))' 2>/dev/null)
echo "$torch_info" | awk '{print "torch " $1 " CUDA " $2 " Python " $3}' > "$build/logs/host.txt"
[ "$rehearse" = 0 ] && nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 >> "$build/logs/host.txt"
echo "$(nproc) cores" >> "$build/logs/host.txt"
device=cuda
[ "$rehearse" = 1 ] && device=cpu
tupe="$build/cli/tupe"
export here carry build prefix work logs rehearse device tupe torch_info torch_prefix torch_site
# shellcheck source=launch/gpu_check_steps.sh
source "$here/launch/gpu_check_steps.sh"  # targets, link_mpi_libs (each step runs it as a script)

# ---- Part 1: build + CUDA tests -----------------------------------------------------------------
if [ "$part" = build ] || [ "$part" = all ]; then
  step_part=build
  run_step preflight serial 15 preflight
  finish_step "$(grep -c MISSING "$logs/preflight.log" 2>/dev/null) missing; $(grep -m1 -o 'torch [^,]*' "$logs/preflight.log")$(grep -h 'network' "$logs/preflight.log" | sed 's/^preflight: /; /')"
  [ "$last_status" = ok ] || exit 1
  run_step unpack serial 30 unpack
  finish_step "$(tail -1 "$logs/unpack.log")"
  [ "$last_status" = ok ] || exit 1
  run_step configure serial 60 configure
  finish_step "$(grep -h -m1 -o 'tupe: CUDA [0-9.]*' "$logs/configure.log") + NCCL: GPU path compiled"
  [ "$last_status" = ok ] || exit 1
  run_step build parallel 450 build_targets
  finish_step "${#targets[@]} targets, $(nproc) cores, $cold"
  [ "$last_status" = ok ] || exit 1
  link_mpi_libs
  run_step unit serial 30 unit_tests
  finish_step "$(grep -h -E '^\[  PASSED  \]' "$logs/unit.log" | tr '\n' ' ')"
  run_step cuda-tier gpu 120 cuda_tier
  finish_step "$(figures ctest "$logs/cuda-tier.log")"
fi

# ---- Part 2: benchmarks ---------------------------------------------------------------------------
if [ "$part" = bench ] || [ "$part" = all ]; then
  step_part=bench
  if [ "$part" = bench ]; then
    run_step rebuild parallel 400 rebuild_if_gone
    finish_step "$(tail -1 "$logs/rebuild.log")"
    [ "$last_status" = ok ] || exit 1
    link_mpi_libs
  fi
  run_step preprocess serial 30 preprocess
  finish_step "$(sed -n 's|.*wrote \([0-9]*\) train sequences.* \([0-9]*\) validation sequences.*shards-\([0-9]*\) in.*|\3: \1 + \2 sequences;|p' "$logs/preprocess.log" | tr '\n' ' ')"
  run_step bench-128 gpu 60 bench 128
  finish_step "$(figures bench "$logs/bench-128.log")"
  for v in "tupe-r tupe-relative true" "bert-a bert-absolute false"; do
    set -- $v
    run_step "pretrain-$1" gpu 45 pretrain "$1" "$2" "$3"
    finish_step "$(figures pretrain "$work/ck-$1/metrics/rank_0.jsonl")"
  done
  run_step allreduce gpu 30 allreduce
  finish_step "$(figures allreduce "$logs/allreduce.log")"
  run_step bench-512 gpu 60 bench 512
  finish_step "$(figures bench "$logs/bench-512.log")"
  run_step finetune gpu 60 finetune
  finish_step "$(figures finetune "$work/ft/results.json")"
fi

failed=$(cut -f3 "$steps" | grep -c -v '^ok$')
[ "$failed" -eq 0 ]
