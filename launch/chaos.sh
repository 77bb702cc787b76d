#!/usr/bin/env bash
# chaos.sh: the chaos soak. A pre-training on the simulated cluster (launch/sim_cluster.sh,
# 3 nodes x 2 ranks, root needed) under a fault schedule drawn from a seed: a rank's SIGKILL,
# a node killed, a node's power cut, a node SIGSTOPped, a link flap, SIGTERM pre-emption, a
# full disk during a save, Open MPI's orted killed. After each fault the job starts again with
# --resume auto on the nodes still up; at the end the weights, optimizer state and data
# position must equal an uninterrupted run's, no whole checkpoint may be lost, no process or
# temporary left. Prints (and writes to WORK/chaos-report.md) each fault's kind, detection
# time and steps lost, and the totals. The driver is tests/cluster/chaos.py.
#
# Usage: launch/chaos.sh WORK [--seed S] [--faults N] [--every K] [--shards DIR] [--replay]
#                             [--lock FILE] [--segment-minutes M] [--report FILE] [--fresh]
#   WORK      the soak's folder: state, shards, checkpoint tmpfs, report.
#             Run the same command again to continue a soak that was stopped.
#   --seed    the schedule's seed (default 1); --faults N (default 8: every kind once)
#   --replay  also replay the attempts' world sizes without the faults: the end state must
#             be bitwise equal to it, as it must be to the uninterrupted run's
#   --fresh   discard a soak in WORK and start again
#   --lock    take an exclusive flock of FILE for each segment of M minutes (the cluster is
#             started and stopped per segment), so that other users of the one simulated
#             cluster get it in between; without --lock, run the whole under flock yourself.
# Examples:
#   flock /var/lock/tupe-cluster launch/chaos.sh /var/tmp/chaos --seed 3 --replay
#   nohup launch/chaos.sh /var/tmp/soak --seed 33 --faults 160 --lock /var/lock/tupe-cluster \
#       --segment-minutes 8 > soak.log 2>&1 &
# Environment: TUPE_BIN (default build/cli/tupe), TUPE_SHARED_DATA (default ../shared/data
# beside the checkout), TUPE_PYTHON (default: the venv of launch/setup.sh, else python3).
# Exit 77 where namespaces are not permitted.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
case "${1:-}" in -h|--help|"") sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;; esac
export TUPE_SOURCE_DIR="$repo"
export TUPE_BIN="${TUPE_BIN:-$repo/build/cli/tupe}"
export TUPE_SHARED_DATA="${TUPE_SHARED_DATA:-$repo/../shared/data}"
[ -x "$TUPE_BIN" ] || { echo "chaos.sh: error: no tupe binary at $TUPE_BIN (bash launch/build.sh, or set TUPE_BIN)" >&2; exit 2; }
[ -d "$TUPE_SHARED_DATA" ] || { echo "chaos.sh: error: no data folder $TUPE_SHARED_DATA (set TUPE_SHARED_DATA)" >&2; exit 2; }
python="${TUPE_PYTHON:-}"
if [ -z "$python" ]; then
  python="$(ls -d "${TUPE_CACHE:-$HOME/.cache/tupe}"/venv-*/bin/python 2>/dev/null | tail -n 1 || true)"
  [ -n "$python" ] || python=python3
fi
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
exec "$python" "$repo/tests/cluster/chaos.py" "$@"
