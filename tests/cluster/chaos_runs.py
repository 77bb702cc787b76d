"""The chaos soak's job (its command line), the runs it is compared with, and the comparison
(chaos.py): an uninterrupted 6-rank run, and a replay of the soak's world sizes without its
faults, both outside the cluster (mpirun -np W on this machine).
"""
import glob
import os
import shutil
import subprocess

import h5py
import numpy as np
from safetensors.numpy import load_file

from cluster_lib import DATA, ENV, TUPE, fail, max_rel_diff, pretrain_args, state, step_dir

NODES, PER_NODE, BATCH, KEEP_LAST, TIMEOUT_S, GRACE_S = 3, 2, 12, 2, 10, 5


def job_args(st, ckpt, world, max_steps=None):
    """`tupe pretrain` arguments of the soak on `world` ranks: the global batch BATCH always, in
    micro-batches of one sequence (BATCH / world micro-steps a rank) whose gradients are summed
    in float64 (dist.reduce_dtype fp64), so that every world size takes the same steps bitwise;
    the LR schedule of st's max_steps whatever `max_steps` this run stops at."""
    opts = {"data.global_batch_size": BATCH, "train.micro_batch_size": 1, "dist.reduce_dtype": "fp64",
            "train.max_steps": max_steps or st["max_steps"], "optimizer.total_steps": max(1000, st["max_steps"]),
            "checkpoint.every_steps": st["every"], "checkpoint.keep_last": KEEP_LAST, "dist.timeout_s": TIMEOUT_S,
            "train.progress": "true", "train.metrics_dir": os.path.join(st["work"], "metrics"),
            "tokenizer.vocab": os.path.join(DATA, "vocab", "bert-base-uncased-vocab.txt")}
    return pretrain_args(st["shards"], ckpt, **opts)


def finished(st):
    """Whether the soak's last attempt completed (every fault done, the run at max_steps)."""
    last = st["attempts"][-1] if st["attempts"] else {}
    return st["next"] >= len(st["schedule"]) and last.get("exit") == 0 and last.get("last_step") == st["max_steps"]


def keep_final(st, ckpt):
    """A copy of the soak's final checkpoint in WORK/final (the tmpfs goes at the end)."""
    final = os.path.join(st["work"], "final")
    src, dst = step_dir(ckpt, st["max_steps"]), step_dir(final, st["max_steps"])
    if not os.path.exists(os.path.join(dst, "manifest.json")):
        shutil.rmtree(final, ignore_errors=True)
        shutil.copytree(src, dst)
    return final


def _mpirun(world, args, what, steps):
    """Run `tupe pretrain args` on `world` ranks of this machine; a hang is bounded by tupe's own
    watchdog (dist.timeout_s), this limit only by 30 minutes plus 2 s per step (a long soak's
    reference of 2,681 steps took more than 30 minutes on 2 loaded cores)."""
    mpi = ["mpirun", "-np", str(world), "--oversubscribe", "--bind-to", "none", TUPE]
    limit_s = 1800 + 2 * steps
    try:
        p = subprocess.run(mpi + args, capture_output=True, text=True, env=ENV, timeout=limit_s)
    except subprocess.TimeoutExpired:
        fail(f"{what} ({steps} steps on {world} ranks) did not finish within {limit_s} s")
    if p.returncode != 0:
        fail(f"{what} failed:\n{p.stderr[-2000:]}")
    return p


def reference(st):
    """An uninterrupted run of 6 ranks outside the cluster, to max_steps (kept: a soak continued
    later reuses it)."""
    ref = os.path.join(st["work"], "uninterrupted")
    if not os.path.exists(os.path.join(step_dir(ref, st["max_steps"]), "manifest.json")):
        shutil.rmtree(ref, ignore_errors=True)
        _mpirun(NODES * PER_NODE, job_args(dict(st, work=os.path.join(st["work"], "ref")), ref, NODES * PER_NODE) +
                ["--resume", "none"], "the uninterrupted run", st["max_steps"])
    return ref


def replay(st):
    """The soak's history without its faults: attempt i trained from the step it resumed at to
    the step attempt i+1 resumed at (its newest whole checkpoint) on its world size; the replay
    runs exactly those pieces, each from the previous piece's checkpoint."""
    rep = os.path.join(st["work"], "replay")
    shutil.rmtree(rep, ignore_errors=True)
    starts = [(a["resumed_at"], a["world"]) for a in st["attempts"] if "resumed_at" in a]
    ends = [r for r, _ in starts[1:]] + [st["max_steps"]]
    done = 0
    for (begin, world), end in zip(starts, ends):
        if end <= begin:
            continue
        if begin != done:
            fail(f"the soak's history has a gap: an attempt resumed at step {begin}, the pieces before reach {done}")
        args = job_args(dict(st, work=os.path.join(st["work"], "replay-work")), rep, world, max_steps=end)
        p = _mpirun(world, args + ["--resume", "auto" if done else "none"], f"the replay's piece {begin}-{end}", end - begin)
        if done and f"at step {done}" not in p.stdout:
            fail(f"the replay's piece {begin}-{end} did not resume at step {done}:\n{p.stdout[-1500:]}")
        done = end
    return rep


def expected_position(st, n):
    """The data position after n steps of BATCH samples: an epoch is the training shards'
    sequences (their headers' num_sequences) rounded down to whole global batches."""
    total = 0
    for f in glob.glob(os.path.join(st["shards"], "train-*.h5")):
        with h5py.File(f, "r") as h:
            total += int(h.attrs["num_sequences"])
    per_epoch = total // BATCH * BATCH
    epoch, within = divmod(n * BATCH, per_epoch)
    return {"epoch": epoch, "consumed_samples": within}


def compare(st, ckpt, ref, what):
    """The soak's final checkpoint against `ref`'s at max_steps: step, data position (epoch and
    consumed samples within it, = steps x BATCH over the epoch's size), the optimizer's step
    counts, weights and Adam moments, all exactly (bitwise) whatever world sizes the attempts
    had (job_args: float64 sums of fixed micro-batches). A line of figures."""
    n = st["max_steps"]
    a, b = load_file(os.path.join(step_dir(ckpt, n), "model.safetensors")), load_file(
        os.path.join(step_dir(ref, n), "model.safetensors"))
    oa = load_file(os.path.join(step_dir(ckpt, n), "optimizer.safetensors"))
    ob = load_file(os.path.join(step_dir(ref, n), "optimizer.safetensors"))
    counts = [k for k in ob if ob[k].dtype.kind in "iu"]
    if oa.keys() != ob.keys() or any(not np.array_equal(oa[k], ob[k]) for k in counts):
        fail(f"the optimizer state's names or step counts differ from {what}'s")
    moments = {k: v for k, v in oa.items() if k not in counts}
    d_w, d_o = max_rel_diff(a, b), max_rel_diff(moments, {k: ob[k] for k in moments})
    sa, sb = state(ckpt, n), state(ref, n)
    worlds = sorted({at["world"] for at in st["attempts"]})
    same = all(np.array_equal(a[k], b[k]) for k in a) and all(np.array_equal(oa[k], ob[k]) for k in oa)
    line = (f"against {what}: step {sa['step']}, data position {sa['data_position']} ({sb['data_position']}); "
            f"weights max relative difference {d_w:.3e}, Adam moments {d_o:.3e}, bitwise {same}; "
            f"world sizes {worlds}")
    print(line, flush=True)
    want = expected_position(st, n)
    if sa["step"] != n or sa["data_position"] != sb["data_position"] or sa["data_position"] != want:
        fail(f"step or data position differ from {what}'s: {sa['step']} {sa['data_position']} vs "
             f"{sb['data_position']}, {want} expected ({n} steps of {BATCH} samples)")
    if not same:
        fail(f"the result is not bitwise equal to {what}'s: {line}")
    return line
