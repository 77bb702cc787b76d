"""The end check of a chaos soak that was stopped before its schedule's end (SIGTERM to
chaos.py: its state is kept, the checkpoint tmpfs stays mounted): its newest whole checkpoint,
step N, against an uninterrupted 6-rank run to step N with the soak's LR schedule (the
schedule of its max_steps, as every attempt ran), compared as chaos.py compares a finished
soak (chaos_runs.compare: step, data position, optimizer step counts, weights and Adam
moments, bitwise).

Usage: chaos_compare.py WORK   (exit 0 when equal; one line of figures either way)
Environment: TUPE_BIN, TUPE_SOURCE_DIR, TUPE_SHARED_DATA (as chaos.py).
"""
import json
import os
import shutil
import sys

from chaos_runs import NODES, PER_NODE, _mpirun, compare, job_args
from cluster_lib import fail, step_dir, verify_manifest, whole_checkpoints


def main():
    if len(sys.argv) != 2:
        fail("usage: chaos_compare.py WORK")
    work = os.path.abspath(sys.argv[1])
    state_path = os.path.join(work, "chaos-state.json")
    if not os.path.exists(state_path):
        fail(f"{state_path}: no soak state (run launch/chaos.sh WORK first)")
    st = json.load(open(state_path))
    ckpt = os.path.join(work, "ckpt-fs", "ckpt")
    steps = whole_checkpoints(ckpt)
    if not steps:
        fail(f"{ckpt}: no whole checkpoint (the tmpfs is unmounted when a soak finishes or is discarded)")
    n = steps[-1]
    stopped = os.path.join(work, "stopped")
    shutil.rmtree(stopped, ignore_errors=True)
    shutil.copytree(step_dir(ckpt, n), step_dir(stopped, n))
    verify_manifest(step_dir(stopped, n))
    ref = os.path.join(work, f"uninterrupted-{n}")
    if not os.path.exists(os.path.join(step_dir(ref, n), "manifest.json")):
        shutil.rmtree(ref, ignore_errors=True)
        world = NODES * PER_NODE
        _mpirun(world, job_args(dict(st, work=os.path.join(work, "ref")), ref, world, max_steps=n) + ["--resume", "none"],
                f"the uninterrupted run to step {n}", n)
    print(f"soak stopped at step {n} of {st['max_steps']}, after {len(st['records'])} of {len(st['schedule'])} faults")
    compare(dict(st, max_steps=n), stopped, ref, f"an uninterrupted 6-rank run to step {n}")
    print(f"chaos compare OK: step {n} bitwise equal")


if __name__ == "__main__":
    main()
