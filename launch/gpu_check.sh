#!/usr/bin/env bash
# The GPU check, as ONE command on a GPU host that brings its own PyTorch and has no network
# (docs/gpu-check.md): unpack the carried packages, configure, build, then the figures first
# (bench-128, pretrain TUPE-R bf16, pretrain BERT-A bf16, a 20-step fp16 pretrain), then the
# unit tests and the CUDA tier, everything within --deadline seconds of its start; --part
# extra adds the all-reduce, bench-512 and SST-2 fine-tuning rows (a second call's worth).
# Prepare first, on a machine with apt and pip: launch/gpu_prepare.sh (fills .gpu-carry/,
# which travels with the checkout).
#
#   launch/gpu_check.sh [--deadline S] [--part all|build|extra]  the check (default: all, 570 s)
#   launch/gpu_check.sh --plan [--deadline S] [--reserve S] [--part P]  the plan only: every
#                                        step's cap and planned time; exit 1 unless it fits with
#                                        the reserve counted in full (a ctest runs it)
#   launch/gpu_check.sh --rehearse [--deadline S] [--reserve S]
#                                        here: the same script in a private mount + network
#                                        namespace where the system's MPI, HDF5, Boost, ... are
#                                        hidden and there is no network, under Python 3.12 +
#                                        torch 2.11 (the host's family); the GPU steps run as
#                                        short CPU runs of the same commands, so every row a CPU
#                                        can rehearse has its figures; the compile is cold (every
#                                        object compiled, as on the host) and its CPU time,
#                                        spread over the host's cores, plans the build
#                                        (TUPE_REHEARSE_CCACHE=1 takes the objects from the cache
#                                        the cold run filled, for quick reruns). Ends with the
#                                        plan check of the measured times.
#
# What it writes, into $OUT when set (else build-gpu/out), after EVERY step, so that a run cut
# short still returns the steps it finished: summary.md (every step's status, time and
# figures, then the plan: each step's time and its estimate on the host), steps.tsv (the
# same, tab-separated) and logs.tar.gz (every step's log). SIGTERM, SIGINT or SIGHUP stop the
# running step, record it as STOPPED and write the three files before exiting (143).
#
# Time: each step runs under a timeout of its cap (below) or of what is left before the
# deadline less 15 s (kept for the last summary), whichever is smaller; a step past its cap
# is recorded as TIMEOUT and the run goes on; a step with less than 10 s left is "skipped".
# Only a failed configure or build stops the run (nothing after it could run).
# The plan: the planned times (what the steps should take on the host; the build's from the
# rehearsal's CPU time, the GPU steps' guesses until a GPU run measures them) must fit the
# deadline with --reserve seconds (default 120: the host's start-up, counted in full) added,
# and so must the steps up to the last figure with every GPU figure at its full cap plus the
# reserve (gpu_figures.py plan). --part all plans 430 s: 550 s with the reserve.
#
# Steps (phase, kind, cap s, planned s); kind says how a rehearsal's time moves to the host:
# parallel = CPU time spread over the host's cores, serial = about the same there, gpu = a CPU
# rehearsal says nothing (its planned time stands).
#   phase   step             kind     cap  plan  what
#   build   preflight        serial    30    5   one line per missing piece: torch, GPU, NCCL,
#                                                nvcc, cmake/ninja, the carried folder, free GPU
#                                                memory; in a rehearsal: the namespace has no network
#   build   unpack           serial   120   30   the carried .debs into build-gpu/prefix (dpkg -x)
#   build   configure        serial    90   20   CMake; fails unless the GPU path is compiled
#   build   build            parallel 300  175   the targets (Ninja, every core; the cold rehearsal
#                                                of 2026-12-02: 2092 CPU-s, over 16 cores at 75%)
#   figures preprocess       serial    60    5   WikiText-2 test split into shards of 128 and 512
#   figures bench-128        gpu       60   30   variant_step_bench, BERT-Base, bf16, seq 128 x 64:
#                                                tokens/s, MFU, TUPE-R / BERT-A, SDPA pinned and default
#   figures pretrain-tupe-r  gpu       45   25   `tupe pretrain`, configs/small.ini (d 256), bf16,
#   figures pretrain-bert-a  gpu       45   25     100 steps: tokens/s (launch-bound at d 256: no MFU
#                                                  figure), last and validation loss
#   figures pretrain-fp16    gpu       40   20   the same, TUPE-R in fp16 with dynamic loss scaling,
#                                                20 steps: tokens/s, loss, loss scale, skipped steps
#   rest    unit             serial    30    5   CPU unit tests the GPU run relies on
#   rest    cuda-tier        gpu      150   90   ctest -L gpu (CUDA vs CPU, SDPA kernels, the cuDNN
#                                                NaN lengths, fp16 skipped step, DDP over NCCL, ...)
#   extra   allreduce        gpu       30   10   NCCL all-reduce at world size 1: us per call only
#   extra   bench-512        gpu       60   30   the same as bench-128 at seq 512 x 16
#   extra   finetune         gpu       60   40   SST-2 from the TUPE-R checkpoint
#   (the extra phase runs with --part extra only, after the build, preprocess and the TUPE-R
#   pretrain its rows need: 340 s planned, a second call's worth; all three parts at once,
#   510 s, would not fit 570 s with the reserve)
# The figures come from launch/gpu_figures.py; the rehearsal runs it on its CPU runs' files.
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
carry="${TUPE_GPU_CARRY:-$here/.gpu-carry}"
cache="${TUPE_CACHE:-$HOME/.cache/tupe}"
mode=check part=all deadline_s=570 reserve_s=120
while [ $# -gt 0 ]; do
  case "$1" in
    --rehearse) mode=rehearse ;;
    --plan) mode=plan ;;
    --part) part="${2:-}"; shift ;;
    --deadline) deadline_s="${2:-}"; shift ;;
    --reserve) reserve_s="${2:-}"; shift ;;
    *) echo "usage: launch/gpu_check.sh [--deadline S] [--part all|build|extra] | --plan | --rehearse [--deadline S] [--reserve S]" >&2
       exit 2 ;;
  esac
  shift
done
case "$part" in
  all|build|extra) ;;
  *) echo "gpu_check: --part: '$part' is not all, build or extra (see the header of launch/gpu_check.sh)" >&2; exit 2 ;;
esac
for v in deadline_s reserve_s; do
  [[ "${!v}" =~ ^[0-9]+$ ]] || { echo "gpu_check: --${v%_s}: '${!v}' is not a number of seconds" >&2; exit 2; }
done

# ---- The steps: phase name kind cap planned ----------------------------------------------------
plan_table="
build preflight serial 30 5
build unpack serial 120 30
build configure serial 90 20
build build parallel 300 175
figures preprocess serial 60 5
figures bench-128 gpu 60 30
figures pretrain-tupe-r gpu 45 25
figures pretrain-bert-a gpu 45 25
figures pretrain-fp16 gpu 40 20
rest unit serial 30 5
rest cuda-tier gpu 150 90
extra allreduce gpu 30 10
extra bench-512 gpu 60 30
extra finetune gpu 60 40
"
case "$part" in  # the steps this part runs (and plans); extra: what its rows need, then them
  build) plan_table=$(echo "$plan_table" | awk '$1 == "build"') ;;
  all) plan_table=$(echo "$plan_table" | awk '$1 != "extra"') ;;
  extra) plan_table=$(echo "$plan_table" | awk '$1 == "build" || $1 == "extra" || $2 == "preprocess" || $2 == "pretrain-tupe-r"') ;;
esac
planned() { echo "$plan_table" | awk -v s="$1" '$2 == s { found = 1 } END { exit !found }'; }  # step
step_field() {  # step field-number (1 phase, 3 kind, 4 cap, 5 planned)
  echo "$plan_table" | awk -v s="$1" -v f="$2" '$2 == s { print $f }'
}
python="${TUPE_PLAN_PYTHON:-python3}"  # --plan: any Python 3 (standard library only)
plan_args=(--deadline "$deadline_s" --reserve "$reserve_s" --host-cores "${TUPE_HOST_CORES:-16}")

if [ "$mode" = plan ]; then
  tsv=$(mktemp /tmp/tupe-gpu-plan.XXXXXX)
  echo "$plan_table" | awk 'NF == 5 { printf "%s\t%s\tplanned\t0\t%s\t%s\t%s\t0\tplanned\n", $1, $2, $3, $4, $5 }' > "$tsv"
  "$python" "$here/launch/gpu_figures.py" plan "$tsv" "${plan_args[@]}"
  rc=$?
  rm -f "$tsv"
  exit $rc
fi

# ---- Rehearsal: re-run this script in a namespace that looks like the GPU host ----------------
if [ "$mode" = rehearse ] && [ -z "${TUPE_REHEARSAL_INSIDE:-}" ]; then
  venv="$cache/venv-rehearse-torch-2.11.0"
  [ -x "$venv/bin/python3" ] || { echo "gpu_check: no rehearsal Python at $venv; run launch/gpu_prepare.sh" >&2; exit 1; }
  command -v unshare >/dev/null || { echo "gpu_check: --rehearse needs unshare (util-linux) and root" >&2; exit 1; }
  exec unshare --mount --net --propagation private env TUPE_REHEARSAL_INSIDE=1 PATH="$venv/bin:$PATH" \
    bash "$here/launch/hide_system_packages.sh" bash "${BASH_SOURCE[0]}" --rehearse --part "$part" \
    --deadline "$deadline_s" --reserve "$reserve_s"
fi

rehearse=0
[ "$mode" = rehearse ] && rehearse=1
if [ "$rehearse" = 1 ]; then build="$here/build-gpu-rehearse"; else build="$here/build-gpu"; fi
out="${OUT:-$build/out}"
prefix="$build/prefix" work="$build/work" logs="$build/logs/steps"
rm -rf "$build/logs"
mkdir -p "$out" "$work" "$logs" || exit 1
steps="$build/logs/steps.tsv"
: > "$steps"
started=$(date +%s)
figures() { python3 "$here/launch/gpu_figures.py" "$@" 2>&1 | tail -1; }

publish() {  # the summary, the steps and the logs so far, into $OUT (after every step, and at exit)
  local title="tupe GPU check" extra=(--measured-gpu)
  [ "$rehearse" = 1 ] && title="tupe GPU check: REHEARSAL on a CPU machine (GPU steps as short CPU runs)" extra=()
  python3 "$here/launch/gpu_figures.py" summary "$steps" --title "$title" --here-cores "$(nproc)" "${plan_args[@]}" \
    "${extra[@]}" --note "$(date -u '+%F %T UTC'); $(tr '\n' ';' < "$build/logs/host.txt" 2>/dev/null)" \
    > "$out/summary.md.new" 2> "$build/logs/summary-error.txt" && mv "$out/summary.md.new" "$out/summary.md"
  cp "$steps" "$out/steps.tsv.new" 2>/dev/null && mv "$out/steps.tsv.new" "$out/steps.tsv"
  tar -C "$build/logs" -czf "$out/logs.tar.gz.new" . 2>/dev/null && mv "$out/logs.tar.gz.new" "$out/logs.tar.gz"
}
on_exit() { local rc=$?; publish; echo "gpu_check: summary $out/summary.md; logs $out/logs.tar.gz"; exit $rc; }
trap on_exit EXIT

record() {  # phase step status seconds kind cap planned cpu-seconds result
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$@" >> "$steps"
  printf '%-8s %-16s %-10s %5ss  %s\n' "$1" "$2" "$3" "$4" "$9"
  publish
}
read_children_cpu() {  # cpu_now = user + system seconds of this shell's finished children
  times > "$build/logs/.times"  # called without $(...): bash's `times` of this very shell (2nd line: children)
  cpu_now=$(tail -1 "$build/logs/.times" | awk '{ s = 0; for (i = 1; i <= 2; ++i) { split($i, p, /[ms]/); s += p[1] * 60 + p[2] } printf "%.0f", s }')
}
left_s() {  # seconds left for steps (a rehearsal has no deadline: its plan check scales its times)
  if [ "$rehearse" = 1 ]; then echo 100000; else echo $(( deadline_s - 15 - ($(date +%s) - started) )); fi
}

# The running step: its timeout process (the leader of the step's own process group), its
# name and start, for the signal handler.
step_pid="" step_t0=0
stop_on_signal() {
  trap - TERM INT HUP
  if [ -n "$step_pid" ]; then
    kill -TERM "$step_pid" 2>/dev/null  # timeout passes it on to the step's processes
    local i
    for i in $(seq 50); do kill -0 "$step_pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL -- "-$step_pid" 2>/dev/null
    record "$(step_field "$last_name" 1)" "$last_name" STOPPED "$(( $(date +%s) - step_t0 ))" "$last_kind" "$last_cap" \
      "$last_planned" 0 "STOPPED by a signal (see $last_name.log)"
  fi
  echo "gpu_check: stopped by a signal" >> "$build/logs/stopped.txt"
  exit 143
}
trap stop_on_signal TERM INT HUP

run_step() {  # name command...: runs it into $logs/<name>.log under a timeout (see the header)
  local name="$1"; shift
  last_name=$name last_kind=$(step_field "$name" 3) last_cap=$(step_field "$name" 4) last_planned=$(step_field "$name" 5)
  last_seconds=0 last_cpu=0
  local left; left=$(left_s)
  if [ "$left" -lt 10 ]; then last_status=skipped; return 1; fi
  local limit=$(( last_cap < left ? last_cap : left )) rc
  [ "$rehearse" = 1 ] && limit=100000  # a CPU rehearsal takes as long as it takes; the plan scales it
  read_children_cpu
  local c0=$cpu_now
  step_t0=$(date +%s)
  timeout --kill-after=5 "$limit" bash "$here/launch/gpu_check_steps.sh" "$@" > "$logs/$name.log" 2>&1 &
  step_pid=$!
  wait "$step_pid"
  rc=$?
  step_pid=""
  last_seconds=$(( $(date +%s) - step_t0 ))
  read_children_cpu
  last_cpu=$(( cpu_now - c0 ))
  if [ $rc = 0 ]; then last_status=ok; elif [ $rc = 124 ] || [ $rc = 137 ]; then last_status=TIMEOUT; else last_status=FAIL; fi
  [ $rc = 0 ]
}
finish_step() {  # result text: records the step run_step ran last
  local result="$1"
  # A step that ran but whose figures could not be read is no success.
  if [ "$last_status" = ok ] && [[ "$result" == figures:* ]]; then last_status=NO-FIGURES; fi
  if [ "$last_status" = skipped ]; then
    result="no time left before the deadline"
  elif [ "$last_status" = TIMEOUT ]; then
    result="TIMEOUT after ${last_seconds} s (cap ${last_cap} s; see $last_name.log)${1:+; $1}"
  elif [ "$last_status" != ok ]; then
    result="$last_status (see $last_name.log)${1:+; $1}"
  fi
  record "$(step_field "$last_name" 1)" "$last_name" "$last_status" "$last_seconds" "$last_kind" "$last_cap" \
    "$last_planned" "$last_cpu" "$result"
}
stop_here() {  # name why: records a step that cannot run, then ends the run
  record "$(step_field "$1" 1)" "$1" skipped 0 "$(step_field "$1" 3)" "$(step_field "$1" 4)" "$(step_field "$1" 5)" 0 "$2"
  exit 1
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

# ---- Build: nothing after it runs without it ------------------------------------------------------
run_step preflight preflight
finish_step "$(grep -c MISSING "$logs/preflight.log" 2>/dev/null) missing; $(grep -m1 -o 'torch [^,]*' "$logs/preflight.log")$(grep -h 'network' "$logs/preflight.log" | sed 's/^preflight: /; /')"
run_step unpack unpack
finish_step "$(tail -1 "$logs/unpack.log")"
run_step configure configure
finish_step "$(grep -h -m1 -o 'tupe: CUDA [0-9.]*' "$logs/configure.log") + NCCL: GPU path compiled"
[ "$last_status" = ok ] || stop_here build "not run: configure did not succeed (see configure.log)"
run_step build build_targets
finish_step "${#targets[@]} targets, $(nproc) cores, $cold"
[ "$last_status" = ok ] || exit 1
link_mpi_libs
[ "$part" = build ] && exit 0

# ---- The figures first ------------------------------------------------------------------------------
run_step preprocess preprocess
finish_step "$(sed -n 's|.*wrote \([0-9]*\) train sequences.* \([0-9]*\) validation sequences.*shards-\([0-9]*\) in.*|\3: \1 + \2 sequences;|p' "$logs/preprocess.log" | tr '\n' ' ')"
if planned bench-128; then
  run_step bench-128 bench 128
  finish_step "$(figures bench "$logs/bench-128.log")"
fi
for v in "tupe-r tupe-relative true bf16" "bert-a bert-absolute false bf16" "fp16 tupe-relative true fp16"; do
  set -- $v
  planned "pretrain-$1" || continue
  run_step "pretrain-$1" pretrain "$1" "$2" "$3" "$4"
  finish_step "$(figures pretrain "$work/ck-$1/metrics/rank_0.jsonl" --launch-bound)"
done

# ---- The rest --------------------------------------------------------------------------------------
if planned unit; then
  run_step unit unit_tests
  finish_step "$(grep -h -E '^\[  PASSED  \]' "$logs/unit.log" | tr '\n' ' ')"
  run_step cuda-tier cuda_tier
  finish_step "$(figures ctest "$logs/cuda-tier.log")"
fi

# ---- The extra rows (--part extra) ----------------------------------------------------------------
if [ "$part" = extra ]; then
run_step allreduce allreduce
finish_step "$(figures allreduce "$logs/allreduce.log")"
run_step bench-512 bench 512
finish_step "$(figures bench "$logs/bench-512.log")"
run_step finetune finetune
finish_step "$(figures finetune "$work/ft/results.json")"
fi

failed=$(cut -f3 "$steps" | grep -c -v '^ok$')
if [ "$rehearse" = 1 ]; then
  echo "gpu_check: the plan of the measured times:"
  python3 "$here/launch/gpu_figures.py" plan "$steps" "${plan_args[@]}" --here-cores "$(nproc)" || failed=$((failed + 1))
fi
[ "$failed" -eq 0 ]
