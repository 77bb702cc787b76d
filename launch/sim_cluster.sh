#!/usr/bin/env bash
# sim_cluster.sh: a cluster of N nodes on one Linux machine, for testing multi-node runs.
#
# Each node is a set of namespaces (network, UTS, mount) with its own hostname (node1..nodeN),
# its own address on a private bridge (10.77.0.<i>/24; the head, where mpirun and slurmctld
# run, is 10.77.0.254), its own /tmp, /dev/shm and node-local scratch (a tmpfs per node,
# mounted at DIR/scratch: every node sees only its own there, the machine outside sees an
# empty folder). Everything else of the file system is shared by all nodes, like a cluster's
# shared file system; so are the folders under /tmp that the cluster needs from this machine
# (its state folder and each --share folder): each node's private /tmp has them bound in, so
# a checkout, a build or a state folder under /tmp works as anywhere else. All of it lives in one PID namespace whose first process is the
# cluster's init: stopping that one process ends every process of the cluster.
#
# Usage: launch/sim_cluster.sh COMMAND DIR ...   (DIR: the cluster's state folder)
#   check                         exit 0 when namespaces may be made here; else one line, exit 77
#   start DIR [--nodes N] [--slurm] [--cpus C] [--share FOLDER]... [--foreground]
#                                 start the cluster (N nodes, default 2). --share: a folder
#                                 under /tmp every node and the head see as this machine's
#                                 (elsewhere a folder is shared anyway). --slurm: munged,
#                                 slurmctld on the head, one slurmd per node (C CPUs each,
#                                 default 2), partition "sim". Returns when it is ready;
#                                 --foreground: stays in the foreground until `down` (a test
#                                 harness waits on it, so no process is left unreaped)
#   exec DIR HOST CMD...          run CMD on HOST (head or nodeI) in the current directory,
#                                 with SLURM_CONF, SIM_SCRATCH and the Open MPI settings below
#   mpirun DIR ARGS...            mpirun on node1 (as a batch script runs on the first node) with the cluster's settings: rsh agent
#                                 DIR/rsh-agent, TCP between nodes and shared memory within
#                                 one (btl tcp,self,vader on 10.77.0.0/24), e.g.
#                                 `mpirun DIR --host node1:2,node2:2 -np 4 build/cli/tupe ...`
#   pids DIR NODE                 the process ids (cluster view) of NODE's processes
#   kill DIR NODE [--power]       SIGKILL every process of NODE (its kernel closes the
#                                 connections: peers see them reset). --power: its link goes
#                                 down first, so peers hear nothing, as after a power cut;
#                                 and the processes outside NODE that started its commands
#                                 (an rsh agent for Open MPI's daemon: here a parent process,
#                                 where ssh would wait on a silent connection) are SIGSTOPped
#                                 instead of seeing their child die
#   stop | cont DIR NODE          SIGSTOP / SIGCONT every process of NODE
#   link-down | link-up DIR NODE  pull / plug NODE's cable (its veth on the bridge)
#   down DIR                      stop the daemons by their pid files, then the cluster's init;
#                                 checks that no process of the cluster is left (exit 1 if so)
# Needs root (or unprivileged user namespaces with CAP_SYS_ADMIN there), util-linux, iproute2;
# --slurm needs slurmctld, slurmd and munged (Debian: slurmctld slurmd slurm-client munge).
set -euo pipefail

self="$(readlink -f "${BASH_SOURCE[0]}")"
NET=10.77.0
die() { echo "sim_cluster: error: $*" >&2; exit 2; }
usage() { sed -n '2,/^set -euo/p' "$self" | sed '$d' | sed 's/^# \{0,1\}//'; }

# ---- helpers (any namespace) ------------------------------------------------------------
check_permitted() {
  local err
  if ! err="$(unshare --pid --fork --net --mount --uts true 2>&1)"; then
    echo "sim_cluster: namespaces are not permitted here (unshare --pid --net --mount --uts: ${err:-refused}); the simulated cluster needs root" >&2
    exit 77
  fi
  local tool
  for tool in ip nsenter unshare; do
    command -v "$tool" >/dev/null 2>&1 || die "'$tool' not found (iproute2 / util-linux)"
  done
}
state_dir() { [ -d "$1" ] || die "no cluster state folder '$1'"; (cd "$1" && pwd -P); }
node_names() { cat "$1/nodes"; }
is_node() { grep -qx "$2" "$1/nodes" || [ "$2" = head ]; }
# The outer process id of the cluster's init (the process unshare forked).
init_pid() {
  local dir="$1" p
  p="$(cat "$dir/init.pid" 2>/dev/null)" || die "$dir: no cluster running (no init.pid)"
  [ -e "/proc/$p/ns/pid" ] || die "$dir: the cluster's init ($p) is not running"
  echo "$p"
}
# Runs `bash sim_cluster.sh _inner DIR ARGS...` inside the cluster (its PID namespace and the head).
inside() {
  local dir="$1"; shift
  SIM_CWD="$PWD" nsenter -t "$(init_pid "$dir")" --pid --mount --net --uts -- bash "$self" _inner "$dir" "$@"
}
# The environment of a command run in the cluster.
cluster_env() {
  local dir="$1"
  echo "SIM_CLUSTER_DIR=$dir" "SIM_SCRATCH=$dir/scratch"
  [ -f "$dir/slurm/slurm.conf" ] && echo "SLURM_CONF=$dir/slurm/slurm.conf"
  echo "OMPI_MCA_plm_rsh_agent=$dir/rsh-agent" "OMPI_MCA_btl=tcp,self,vader"
  echo "OMPI_MCA_btl_tcp_if_include=$NET.0/24" "OMPI_MCA_oob_tcp_if_include=$NET.0/24"
  echo "OMPI_MCA_btl_vader_single_copy_mechanism=none" "OMPI_ALLOW_RUN_AS_ROOT=1" "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"
}

# ---- inside the cluster -------------------------------------------------------------------
holder_pid() { cat "$1/$2.pid"; }
# Every process (cluster pids) in NODE's network namespace, except its holder.
node_pids() {
  local dir="$1" node="$2" holder ns p
  holder="$(holder_pid "$dir" "$node")"
  ns="$(readlink "/proc/$holder/ns/net")"
  for p in /proc/[0-9]*; do
    p="${p#/proc/}"
    [ "$p" = "$holder" ] && continue
    [ "$(readlink "/proc/$p/ns/net" 2>/dev/null)" = "$ns" ] && echo "$p"
  done
  return 0
}
# The processes outside NODE (not the cluster's init) whose children run on NODE.
outside_parents() {
  local dir="$1" node="$2" ns p pp
  ns="$(readlink "/proc/$(holder_pid "$dir" "$node")/ns/net")"
  for p in $(node_pids "$dir" "$node"); do
    pp="$(awk '/^PPid:/ { print $2 }' "/proc/$p/status" 2>/dev/null)"
    [ -n "$pp" ] && [ "$pp" -gt 1 ] || continue
    [ "$(readlink "/proc/$pp/ns/net" 2>/dev/null)" = "$ns" ] || echo "$pp"
  done | sort -u
}
signal_node() {
  local dir="$1" node="$2" sig="$3" n=0 p
  for p in $(node_pids "$dir" "$node"); do
    kill "-$sig" "$p" 2>/dev/null && n=$((n + 1))
  done
  echo "sim_cluster: SIG$sig to $n process(es) of $node"
}
link() { ip link set "v-$2" "$3"; echo "sim_cluster: link of $2 $3"; }
on_host() {
  local dir="$1" host="$2"; shift 2
  local pid
  pid="$(holder_pid "$dir" "$host")"
  # shellcheck disable=SC2046
  exec nsenter -t "$pid" --net --uts --mount -- env $(cluster_env "$dir") \
    sh -c 'cd "$0" 2>/dev/null || cd /; exec "$@"' "${SIM_CWD:-$PWD}" "$@"
}
wait_gone() {  # pid, tenths of a second
  local i
  for ((i = 0; i < $2; i++)); do kill -0 "$1" 2>/dev/null || return 0; sleep 0.1; done
  return 1
}
stop_daemons() {
  local dir="$1" f p
  for f in "$dir"/slurm/slurmd-*.pid "$dir/slurm/slurmctld.pid" "$dir/munge/munged.pid"; do
    [ -f "$f" ] || continue
    p="$(cat "$f")"
    if kill -TERM "$p" 2>/dev/null; then
      wait_gone "$p" 100 || kill -KILL "$p" 2>/dev/null || true
    fi
  done
}
inner() {
  local dir="$1" what="$2"; shift 2
  case "$what" in
    exec) on_host "$dir" "$@" ;;
    pids) node_pids "$dir" "$1" ;;
    kill)
      if [ "${2:-}" = --power ]; then
        link "$dir" "$1" down >/dev/null
        local parents n=0 p
        parents="$(outside_parents "$dir" "$1")"
        for p in $parents; do kill -STOP "$p" 2>/dev/null && n=$((n + 1)); done
        echo "sim_cluster: link of $1 down; SIGSTOP to $n process(es) outside $1 that started commands there"
      fi
      signal_node "$dir" "$1" KILL ;;
    stop) signal_node "$dir" "$1" STOP ;;
    cont) signal_node "$dir" "$1" CONT ;;
    link-down) link "$dir" "$1" down ;;
    link-up) link "$dir" "$1" up ;;
    stop-daemons) stop_daemons "$dir" ;;
    *) die "unknown inner command '$what'" ;;
  esac
}

# A private /tmp (a tmpfs of SIZE) in this mount namespace, with the folders listed in
# DIR/shares (this machine's, under /tmp) bound into it at their paths, each with the mounts
# it holds when the cluster starts. The machine's /tmp stays reachable through a descriptor
# opened before the mount (fd 9) while they are bound.
private_tmp() {
  local dir="$1" label="$2" size="$3" shared=() f
  [ -f "$dir/shares" ] && mapfile -t shared < "$dir/shares"
  exec 9< /tmp
  mount -t tmpfs -o "size=$size" "$label" /tmp
  for f in "${shared[@]}"; do
    mkdir -p "$f"
    # --rbind: with the mounts inside it (a test's checkpoint tmpfs); canonicalized, the source
    # would be the new /tmp.
    mount --no-canonicalize --rbind "/proc/self/fd/9/${f#/tmp/}" "$f"
  done
  exec 9<&-
}

# A node's holder: its own hostname, /tmp, /dev/shm and scratch; then it sleeps.
node_holder() {
  local dir="$1" name="$2"
  hostname "$name"
  mount --bind "$dir/hosts" /etc/hosts
  private_tmp "$dir" "tmp-$name" 512m
  mount -t tmpfs -o size=256m "shm-$name" /dev/shm
  mount -t tmpfs -o size=1g "scratch-$name" "$dir/scratch"
  ip link set lo up
  echo $$ > "$dir/$name.pid.new" && mv "$dir/$name.pid.new" "$dir/$name.pid"
  exec sleep infinity
}

# Slurm on the cluster (called by the init): one munged for every node (its socket is a
# file, which every namespace reaches), slurmctld on the head, slurmd -N nodeI on each node.
slurm_up() {
  local dir="$1" nodes="$2" cpus="$3" i s conf="$1/slurm/slurm.conf"
  local tool
  for tool in munged slurmctld slurmd sinfo; do
    command -v "$tool" >/dev/null 2>&1 || { echo "'$tool' not found (apt-get install slurmctld slurmd slurm-client munge)"; return 1; }
  done
  mkdir -p "$dir/munge" "$dir/slurm/state" "$dir/slurm/spool"
  chmod 700 "$dir/munge"
  dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
  chmod 400 "$dir/munge/munge.key"
  munged --force --key-file="$dir/munge/munge.key" --socket="$dir/munge/munge.socket" \
    --pid-file="$dir/munge/munged.pid" --log-file="$dir/munge/munged.log" --seed-file="$dir/munge/munged.seed"
  cat > "$conf" <<CONF
# written by launch/sim_cluster.sh for the simulated cluster in $dir
ClusterName=sim
SlurmctldHost=head($NET.254)
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/munge.socket
SlurmUser=root
StateSaveLocation=$dir/slurm/state
SlurmdSpoolDir=$dir/slurm/spool/%n
SlurmctldPidFile=$dir/slurm/slurmctld.pid
SlurmdPidFile=$dir/slurm/slurmd-%n.pid
SlurmctldLogFile=$dir/slurm/slurmctld.log
SlurmdLogFile=$dir/slurm/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
ReturnToService=2
SlurmdTimeout=10
SlurmctldTimeout=10
MessageTimeout=5
KillWait=20
MinJobAge=30
InactiveLimit=0
JobRequeue=1
CONF
  for ((i = 1; i <= nodes; i++)); do
    echo "NodeName=node$i NodeAddr=$NET.$i CPUs=$cpus RealMemory=2000 State=UNKNOWN" >> "$conf"
  done
  echo "PartitionName=sim Nodes=ALL Default=YES MaxTime=INFINITE State=UP" >> "$conf"
  slurmctld -f "$conf"
  for ((i = 1; i <= nodes; i++)); do
    nsenter -t "$(holder_pid "$dir" "node$i")" --net --uts --mount -- slurmd -f "$conf" -N "node$i"
  done
  for s in $(seq 300); do
    [ "$(SLURM_CONF=$conf sinfo -h -N -o '%T' 2>/dev/null | grep -c '^idle')" = "$nodes" ] && return 0
    sleep 0.1
  done
  echo "the $nodes node(s) were not idle after 30 s: $(SLURM_CONF=$conf sinfo -h -N -o '%N %T' 2>&1 | paste -sd' ')"
  return 1
}

# The cluster's init (PID 1 of the cluster's PID namespace, in the head's namespaces): builds
# the bridge and the nodes, starts Slurm, then reaps orphans until it is stopped.
cluster_init() {
  local dir="$1" nodes="$2" slurm="$3" cpus="$4" i name pid
  trap 'exit 0' TERM
  hostname head
  mount --bind "$dir/hosts" /etc/hosts
  private_tmp "$dir" tmp-head 256m
  echo 1 > "$dir/head.pid"
  ip link set lo up
  ip link add br0 type bridge
  ip addr add "$NET.254/24" dev br0
  ip link set br0 up
  for ((i = 1; i <= nodes; i++)); do
    name="node$i"
    unshare --net --uts --mount --propagation private -- bash "$self" _node "$dir" "$name" &
    for _ in $(seq 100); do [ -f "$dir/$name.pid" ] && break; sleep 0.05; done
    pid="$(cat "$dir/$name.pid")" || { echo "node $name did not start" > "$dir/failed"; exit 1; }
    ip link add "v-$name" type veth peer name eth0 netns "$pid"
    ip link set "v-$name" master br0 up
    nsenter -t "$pid" --net ip addr add "$NET.$i/24" dev eth0
    nsenter -t "$pid" --net ip link set eth0 up
  done
  if [ "$slurm" = 1 ]; then
    if ! slurm_up "$dir" "$nodes" "$cpus" > "$dir/slurm-up.log" 2>&1; then
      echo "Slurm did not start: $(tail -n 1 "$dir/slurm-up.log")" > "$dir/failed"
      exit 1
    fi
  fi
  touch "$dir/ready"
  while :; do sleep 1 & wait $! || true; done
}

start() {
  local dir="" nodes=2 slurm=0 cpus=2 foreground=0 shares=() f
  while [ $# -gt 0 ]; do
    case "$1" in
      --share)
        [ -d "${2:-}" ] || die "--share: '${2:-}' is not a folder"
        shares+=("$(cd "$2" && pwd -P)"); shift 2 ;;
      --nodes) nodes="${2:?--nodes needs a value}"; shift 2 ;;
      --slurm) slurm=1; shift ;;
      --cpus) cpus="${2:?--cpus needs a value}"; shift 2 ;;
      --foreground) foreground=1; shift ;;
      -*) die "start: unknown option '$1'" ;;
      *) [ -z "$dir" ] || die "start: one state folder, got '$dir' and '$1'"; dir="$1"; shift ;;
    esac
  done
  [ -n "$dir" ] || die "start: no state folder"
  [[ "$nodes" =~ ^[0-9]+$ ]] && [ "$nodes" -ge 1 ] && [ "$nodes" -le 200 ] || die "--nodes: '$nodes' is not a count 1..200"
  check_permitted
  mkdir -p "$dir"
  dir="$(cd "$dir" && pwd -P)"
  case "$dir/" in
    /dev/shm/*) die "start: the state folder $dir is under /dev/shm, which each node has of its own; take one elsewhere" ;;
  esac
  if [ -f "$dir/init.pid" ] && [ -e "/proc/$(cat "$dir/init.pid")/ns/pid" ]; then
    die "$dir: a cluster is running there (sim_cluster.sh down $dir)"
  fi
  rm -rf "$dir/ready" "$dir/failed" "$dir"/*.pid "$dir/slurm" "$dir/munge"
  # The folders under /tmp the nodes see as this machine's: the state folder, each --share
  # (outermost first, so that a folder inside another is bound after it, i.e. on top).
  for f in "$dir" "${shares[@]}"; do
    case "$f/" in /tmp/?*) echo "$f" ;; esac
  done | sort -u > "$dir/shares"
  mkdir -p "$dir/scratch"
  { echo "127.0.0.1 localhost"; echo "$NET.254 head"
    for ((i = 1; i <= nodes; i++)); do echo "$NET.$i node$i"; done; } > "$dir/hosts"
  seq -f 'node%g' 1 "$nodes" > "$dir/nodes"
  printf '#!/bin/sh\n# Open MPI rsh agent: AGENT HOST COMMAND... runs COMMAND on HOST of this cluster.\nexec bash %q _agent %q "$@"\n' \
    "$self" "$dir" > "$dir/rsh-agent"
  chmod +x "$dir/rsh-agent"
  # unshare stays outside as the init's parent; --kill-child: when it ends, the init is
  # killed, and with it every process of the cluster's PID namespace.
  # In the foreground, unshare also dies with this script (setpriv --pdeathsig).
  local guard=()
  [ "$foreground" = 1 ] && guard=(setpriv --pdeathsig KILL)
  "${guard[@]}" unshare --pid --fork --kill-child --mount-proc --net --mount --uts --propagation private -- \
    bash "$self" _init "$dir" "$nodes" "$slurm" "$cpus" < /dev/null > "$dir/init.log" 2>&1 &
  local unshare_pid=$!
  echo "$unshare_pid" > "$dir/unshare.pid"
  local init="" i
  for ((i = 0; i < 600; i++)); do
    if [ -z "$init" ]; then
      init="$(cat "/proc/$unshare_pid/task/$unshare_pid/children" 2>/dev/null | awk '{print $1}')"
      [ -n "$init" ] && echo "$init" > "$dir/init.pid" && readlink "/proc/$init/ns/pid" > "$dir/pidns"
    fi
    [ -f "$dir/ready" ] || [ -f "$dir/failed" ] && break
    kill -0 "$unshare_pid" 2>/dev/null || break
    sleep 0.1
  done
  if [ ! -f "$dir/ready" ]; then
    local why="did not become ready in 60 s"
    kill -0 "$unshare_pid" 2>/dev/null || why="ended at start: $(tail -n 1 "$dir/init.log")"
    [ -f "$dir/failed" ] && why="$(cat "$dir/failed")"
    kill -TERM "$unshare_pid" 2>/dev/null || true
    wait "$unshare_pid" 2>/dev/null || true
    echo "sim_cluster: error: the cluster in $dir $why (log: $dir/init.log)" >&2
    exit 1
  fi
  echo "sim_cluster: $nodes node(s) up in $dir ($( [ "$slurm" = 1 ] && echo "Slurm, " )head $NET.254, node-local scratch $dir/scratch)"
  if [ "$foreground" = 1 ]; then
    wait "$unshare_pid" || true
  fi
}

down() {
  local dir
  dir="$(state_dir "$1")"
  [ -f "$dir/unshare.pid" ] || die "$dir: no cluster was started there"
  local unshare_pid pidns left=() p
  unshare_pid="$(cat "$dir/unshare.pid")"
  pidns="$(cat "$dir/pidns" 2>/dev/null || true)"
  if [ -f "$dir/init.pid" ] && [ -e "/proc/$(cat "$dir/init.pid")/ns/pid" ]; then
    inside "$dir" stop-daemons || true
  fi
  # SIGKILL to the init of a PID namespace ends every process in it (unshare ignores
  # SIGTERM while it waits for its child, and then exits itself).
  local init i
  init="$(cat "$dir/init.pid" 2>/dev/null || true)"
  [ -n "$pidns" ] || die "$dir: the cluster's PID namespace was not recorded (start failed?)"
  if [ -n "$init" ] && [ "$(readlink "/proc/$init/ns/pid" 2>/dev/null)" = "$pidns" ]; then
    kill -KILL "$init" 2>/dev/null || true
  fi
  for ((i = 0; i < 100; i++)); do
    left=()
    if [ -n "$pidns" ]; then
      for p in /proc/[0-9]*; do
        [ "$(readlink "$p/ns/pid" 2>/dev/null)" = "$pidns" ] && left+=("${p#/proc/}")
      done
    fi
    # unshare gone, or a zombie whose parent (who started it) has not reaped it yet
    if [ ${#left[@]} -eq 0 ] && { [ ! -e "/proc/$unshare_pid" ] ||
         [ "$(awk '{print $3}' "/proc/$unshare_pid/stat" 2>/dev/null)" = Z ]; }; then
      break
    fi
    sleep 0.1
  done
  rm -f "$dir/init.pid" "$dir/unshare.pid" "$dir/ready"
  if [ ${#left[@]} -gt 0 ]; then
    echo "sim_cluster: error: processes of the cluster in $dir are still running: ${left[*]}" >&2
    exit 1
  fi
  echo "sim_cluster: the cluster in $dir is down; no process of it is left"
}

cmd="${1:-}"
[ -n "$cmd" ] || { usage >&2; exit 2; }
shift
case "$cmd" in
  -h|--help|help) usage ;;
  check) check_permitted ;;
  start) start "$@" ;;
  down) [ $# -eq 1 ] || die "down DIR"; down "$1" ;;
  exec)
    [ $# -ge 3 ] || die "exec DIR HOST CMD..."
    d="$(state_dir "$1")"; is_node "$d" "$2" || die "$d: no host '$2' (head, $(node_names "$d" | paste -sd,))"
    shift; inside "$d" exec "$@" ;;
  mpirun)
    [ $# -ge 1 ] || die "mpirun DIR ARGS..."
    d="$(state_dir "$1")"; shift
    inside "$d" exec node1 mpirun "$@" ;;
  pids|kill|stop|cont|link-down|link-up)
    [ $# -ge 2 ] || die "$cmd DIR NODE"
    d="$(state_dir "$1")"; grep -qx "$2" "$d/nodes" || die "$d: no node '$2' ($(node_names "$d" | paste -sd,))"
    shift; inside "$d" "$cmd" "$@" ;;
  _inner) inner "$@" ;;
  _init) cluster_init "$@" ;;
  _node) node_holder "$@" ;;
  _agent) d="$1"; host="$2"; shift 2; on_host "$d" "$host" sh -c "$*" ;;
  *) die "unknown command '$cmd' (--help lists them)" ;;
esac
