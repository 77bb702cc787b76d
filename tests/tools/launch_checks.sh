#!/usr/bin/env bash
# Dry-run checks of the cluster launchers: the commands they would run, compared with the
# command lines written out by hand here for given nodes / GPUs (GPU count faked through
# TUPE_GPUS_PER_NODE). Usage: launch_checks.sh mpirun|sbatch REPO WORKDIR
set -uo pipefail
mode="$1" repo="$2" work="$3"
mkdir -p "$work"
failures=0
# expect NAME EXPECTED ACTUAL
expect() {
  if [ "$2" == "$3" ]; then echo "ok   $1"; else
    echo "FAIL $1"; echo "  expected: $2"; echo "  actual:   $3"; failures=$((failures + 1)); fi
}
# expect_rc NAME RC_WANTED PATTERN COMMAND...: exit status and a stderr line matching PATTERN
expect_error() {
  local name="$1" pattern="$2"; shift 2
  local err rc
  err="$("$@" 2>&1 >/dev/null)"; rc=$?
  if [ "$rc" -ne 0 ] && grep -qE -- "$pattern" <<<"$err"; then echo "ok   $name"; else
    echo "FAIL $name (rc $rc): $err"; failures=$((failures + 1)); fi
}
root_flag=""
[ "$(id -u)" -eq 0 ] && root_flag=" --allow-run-as-root"
# mpirun and its daemons run with SIGTERM blocked (coreutils' env --block-signal), as printed
# by --dry-run (shell-quoted).
shield="env --block-signal=TERM"
agent='--mca orte_launch_agent env\ --block-signal=TERM\ orted'

tupe_bin="$repo/build/cli/tupe"
run() { env -i PATH="/usr/bin:/bin" HOME="$HOME" "$@" 2>/dev/null; }

case "$mode" in
mpirun)
  w="$repo/launch/tupe-mpirun"
  expect "2 nodes x 8 GPUs, NCCL vars forwarded" \
    "$shield mpirun -np 16 --map-by ppr:8:node --bind-to none --mca btl_vader_single_copy_mechanism none $agent$root_flag -x NCCL_DEBUG -x NCCL_SOCKET_IFNAME -x TUPE_GPUS_PER_NODE -x OMP_NUM_THREADS -x PATH $tupe_bin pretrain --config configs/tupe-r-base.ini --resume auto" \
    "$(run TUPE_GPUS_PER_NODE=8 NCCL_DEBUG=WARN NCCL_SOCKET_IFNAME=eth0 "$w" --nodes 2 --dry-run -- pretrain --config configs/tupe-r-base.ini --resume auto)"
  printf '# two nodes\nnode-a slots=4\nnode-b slots=4\n\nnode-c slots=4\n' > "$work/hosts"
  expect "hostfile: 3 nodes x 4 GPUs, socket binding, explicit binary" \
    "$shield mpirun -np 12 --map-by ppr:4:node --bind-to socket --mca btl_vader_single_copy_mechanism none $agent --hostfile $work/hosts$root_flag -x TUPE_GPUS_PER_NODE -x OMP_NUM_THREADS -x PATH /bin/echo pretrain" \
    "$(run TUPE_GPUS_PER_NODE=4 "$w" --hostfile "$work/hosts" --bind-to socket --dry-run -- /bin/echo pretrain)"
  expect "no GPU: --cpu-ranks per node, OMP_NUM_THREADS kept" \
    "$shield mpirun -np 6 --map-by ppr:3:node --bind-to none --mca btl_vader_single_copy_mechanism none $agent$root_flag -x TUPE_GPUS_PER_NODE -x OMP_NUM_THREADS -x PATH $tupe_bin info" \
    "$(run TUPE_GPUS_PER_NODE=0 OMP_NUM_THREADS=2 "$w" --nodes 2 --cpu-ranks 3 --dry-run -- info)"
  # GPU count from a fake nvidia-smi on PATH (3 GPUs listed).
  mkdir -p "$work/bin"
  printf '#!/bin/sh\necho "GPU 0: NVIDIA H100 (UUID: a)"\necho "GPU 1: NVIDIA H100 (UUID: b)"\necho "GPU 2: NVIDIA H100 (UUID: c)"\n' > "$work/bin/nvidia-smi"
  chmod +x "$work/bin/nvidia-smi"
  expect "GPU count from nvidia-smi -L" \
    "$shield mpirun -np 3 --map-by ppr:3:node --bind-to none --mca btl_vader_single_copy_mechanism none $agent$root_flag -x OMP_NUM_THREADS -x PATH $tupe_bin info" \
    "$(env -i PATH="$work/bin:/usr/bin:/bin" HOME="$HOME" "$w" --dry-run -- info 2>/dev/null)"
  expect_error "unknown binding refused" "--bind-to: 'core' is not one of none, socket" "$w" --bind-to core --dry-run -- info
  expect_error "more nodes than the hostfile refused" "lists only 3 host" "$w" --hostfile "$work/hosts" --nodes 4 --dry-run -- info
  expect_error "missing tupe command refused" "no tupe command after --" "$w" --dry-run
  # The last line after a failure, from a fake mpirun replaying Open MPI's output of two real
  # faults on the simulated cluster (3 nodes x 2 ranks): rank 0 SIGKILLed (its peers report
  # the disconnected peer on node1; the node was not lost), and node2's daemon lost.
  placement='placement: node1 ranks 0-1; node2 ranks 2-3; node3 ranks 4-5 (6 ranks on 3 nodes)'
  cat > "$work/bin/mpirun-rank-killed" <<FAKE
#!/bin/sh
echo "$placement"
printf '%s\n' 'An MPI communication peer process has unexpectedly disconnected.' '  Local host: node2' \
  '  Local PID:  108' '  Peer host:  node1' 'WARNING: Open MPI failed to TCP connect to a peer MPI process.' \
  '  Message:    connect() to 127.0.0.1:1025 failed' \
  'mpirun noticed that process rank 0 with PID 0 on node node1 exited on signal 9 (Killed).' >&2
exit 137
FAKE
  cat > "$work/bin/mpirun-node-lost" <<FAKE
#!/bin/sh
echo "$placement"
printf '%s\n' 'ORTE has lost communication with a remote daemon.' '  HNP daemon   : [[1,0],0] on node node1' \
  '  Remote daemon: [[1,0],2] on node node2' '  Peer host:  node1' \
  'mpirun noticed that process rank 3 with PID 0 on node node2 exited on signal 9 (Killed).' >&2
exit 205
FAKE
  chmod +x "$work/bin/mpirun-rank-killed" "$work/bin/mpirun-node-lost"
  last="$(env -i PATH="/usr/bin:/bin" HOME="$HOME" TUPE_GPUS_PER_NODE=0 "$w" --nodes 3 --cpu-ranks 2 \
          --mpirun "$work/bin/mpirun-rank-killed" -- info 2>&1 >/dev/null | tail -n 1)"
  expect "a killed rank is named, its node not called lost" \
    "tupe-mpirun: the job ended (mpirun exit 137) after: rank 0 on node1 ended by signal 9 (Killed)" "$last"
  last="$(env -i PATH="/usr/bin:/bin" HOME="$HOME" TUPE_GPUS_PER_NODE=0 "$w" --nodes 3 --cpu-ranks 2 \
          --mpirun "$work/bin/mpirun-node-lost" -- info 2>&1 >/dev/null | tail -n 1)"
  expect "a lost daemon's node is named with its ranks" \
    "tupe-mpirun: lost node node2 (ranks 2-3): the job ended (mpirun exit 205)" "$last"
  ;;
sbatch)
  s="$repo/launch/tupe.sbatch"
  if bash -n "$s"; then echo "ok   bash -n"; else echo "FAIL bash -n"; failures=$((failures + 1)); fi
  for directive in "--signal=B:USR1@120" "--requeue"; do
    if grep -q "^#SBATCH $directive\$" "$s"; then echo "ok   #SBATCH $directive"; else
      echo "FAIL #SBATCH $directive missing"; failures=$((failures + 1)); fi
  done
  expect "srun command (SLURM environment of 4 nodes x 8 tasks)" \
    "srun --mpi=pmix --kill-on-bad-exit=1 --nodes=4 --ntasks-per-node=8 --cpu-bind=none /opt/tupe/bin/tupe pretrain --config /cfg/base.ini --resume auto --checkpoint.dir /ckpt/run1" \
    "$(run TUPE_DRY_RUN=1 SLURM_JOB_NUM_NODES=4 SLURM_NTASKS_PER_NODE=8 TUPE_BIN=/opt/tupe/bin/tupe TUPE_CONFIG=/cfg/base.ini bash "$s" --checkpoint.dir /ckpt/run1)"
  cmd="$(run TUPE_DRY_RUN=1 TUPE_LAUNCHER=mpirun SLURM_JOB_NUM_NODES=2 SLURM_NTASKS_PER_NODE=4 TUPE_BIN=/opt/tupe/bin/tupe TUPE_CONFIG=/cfg/base.ini bash "$s")"
  expect "mpirun launcher through tupe-mpirun" \
    "$repo/launch/tupe-mpirun --hostfile /tmp/tupe-hosts-dry --nodes 2 --gpus-per-node 4 -- /opt/tupe/bin/tupe pretrain --config /cfg/base.ini --resume auto" \
    "$cmd"
  # And the command tupe-mpirun then builds from it still carries --resume auto.
  printf 'n1 slots=4\nn2 slots=4\n' > "$work/hosts2"
  inner="$(run "$repo/launch/tupe-mpirun" --hostfile "$work/hosts2" --nodes 2 --gpus-per-node 4 --dry-run -- /opt/tupe/bin/tupe pretrain --config /cfg/base.ini --resume auto)"
  case "$inner" in *"-np 8 "*"pretrain --config /cfg/base.ini --resume auto") echo "ok   generated mpirun command has --resume auto" ;;
    *) echo "FAIL generated mpirun command: $inner"; failures=$((failures + 1)) ;; esac
  ;;
*) echo "usage: launch_checks.sh mpirun|sbatch REPO WORKDIR"; exit 2 ;;
esac
echo "$failures failure(s)"
[ "$failures" -eq 0 ]
