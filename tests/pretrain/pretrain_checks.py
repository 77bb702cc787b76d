"""End-to-end checks of `tupe pretrain` under mpirun on real text (WikiText-2 test split).

Each check runs the real executable in subprocesses and inspects what it wrote (checkpoint
safetensors read with Python's `safetensors`, trainer_state.json, metrics JSONL), so the
expectations come from outside the C++ code.

Usage: pretrain_checks.py CHECK WORKDIR
  shards      preprocess WikiText-2 into WORKDIR/shards (fixture for the others)
  exactness   2 ranks x micro-batch b == 1 rank x 2b == 1 rank x b with 2 accumulation steps
  exactness_cuda  the same on one GPU: 1 rank x 2b == 1 rank x b x 2 accumulation steps
              (exit 77, "skipped", when no CUDA device is visible)
  resume      10 steps + resume + 10 == 20 straight, bitwise; 2 ranks -> resume on 1 rank;
              with dropout 0.1, 2 ranks -> resume on 1 and on 3 ranks == 2 ranks throughout (1e-6)
  crash       a checkpoint write killed midway leaves the previous one for --resume auto;
              a file damaged later is refused by --resume PATH and skipped, with a message, by
              --resume auto, which refuses to start fresh over damaged checkpoints;
              --resume none refuses a folder holding checkpoints
  signal      SIGUSR1 checkpoints and stops; --resume auto continues
  signal_setup  SIGTERM during setup (before the loop): a clean stop with a checkpoint at the
              step reached (0 when still setting up), not a death by signal; resume continues
  watchdog    a stalled rank ends the whole job with the watchdog's message
  learns      tiny TUPE-R under mpirun -np 2 lowers its MLM loss clearly
  validation  the validation loss of a 2-rank job (its evaluation: device sums, one
              all-reduce) equals a float64 recomputation from its checkpoint on one process
              ($TUPE_VALIDATION_REFERENCE, validation_reference.cpp) to 1e-6 relative
  tensorboard pretrain's and finetune's TensorBoard scalars (read by the tensorboard package)
              equal their metrics JSONL / results.json; off when switched off
  mfu         with an empty $TUPE_CACHE, fp32 and bf16: step 1 is logged within 10 s of the
              effective-config line, and every record's MFU is in (0, 1], recomputed here
              from flops_per_token, tokens_per_s and the peak, which is the CPU's own figures
              (threads x clock x FLOPs/cycle; the clock at least /proc/cpuinfo's)
  warnings    under mpirun -np 2 a job warns once, not once per rank (shards of format
              version 2, a config-file tokenizer value the shards contradict), and
              effective_config.ini shows the shards' tokenizer values
Environment: TUPE_BIN (the tupe executable), TUPE_SOURCE_DIR, TUPE_SHARED_DATA.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
from safetensors.numpy import load_file

TUPE = os.environ["TUPE_BIN"]
SRC = os.environ["TUPE_SOURCE_DIR"]
DATA = os.environ.get("TUPE_SHARED_DATA", os.path.join(SRC, "..", "shared", "data"))
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_btl_vader_single_copy_mechanism="none", OMP_NUM_THREADS="1")


def mpirun(np_, args, check=True, env=None, timeout=600):
    cmd = ["mpirun", "-np", str(np_), "--oversubscribe", "--bind-to", "none", TUPE] + args
    p = subprocess.run(cmd, env=env or ENV, capture_output=True, text=True, timeout=timeout)
    if check and p.returncode != 0:
        sys.exit(f"FAILED: {' '.join(cmd)}\nexit {p.returncode}\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    return p


def error_lines(p):
    """The "tupe pretrain: error: ..." lines of a finished run (mpirun adds its own text)."""
    return [line for line in p.stderr.splitlines() if line.startswith("tupe pretrain: error: ")]


def pretrain_args(work, ckpt, **overrides):
    """A tiny TUPE-R on the test shards; dropout off unless overridden."""
    opts = {
        "model.hidden_size": 32, "model.num_layers": 2, "model.num_heads": 4, "model.ffn_size": 64,
        "model.hidden_dropout": 0.0, "model.attention_dropout": 0.0,
        "data.train_shards": f"{work}/../shards", "data.validation_shards": "", "data.global_batch_size": 8,
        "optimizer.warmup_steps": 5, "optimizer.total_steps": 40, "optimizer.lr": 1e-3,
        "precision.precision": "fp32", "checkpoint.dir": ckpt, "checkpoint.every_steps": 10,
        "checkpoint.keep_last": 0, "train.micro_batch_size": 4, "train.log_every": 1, "train.threads": 1,
        "train.progress": "false", "dist.timeout_s": 120,
    }
    opts.update(overrides)
    args = ["pretrain", "--config", os.path.join(SRC, "configs", "tiny.ini")]
    for k, v in opts.items():
        args += [f"--{k}", str(v)]
    return args


def checkpoint(ckpt, step):
    d = os.path.join(ckpt, f"step_{step:08d}")
    state = json.load(open(os.path.join(d, "trainer_state.json")))
    return load_file(os.path.join(d, "model.safetensors")), load_file(os.path.join(d, "optimizer.safetensors")), state


def max_rel_diff(a, b):
    """Largest per-tensor max|a - b| / max|b|. The denominator is floored at 1e-2: tensors
    whose entries all stay near 0 (e.g. attention key biases, whose gradient is 0 in exact
    arithmetic, so they only collect rounding noise) are compared absolutely at that scale."""
    worst = 0.0
    assert a.keys() == b.keys(), (sorted(a.keys() ^ b.keys()))
    for k in a:
        x, y = a[k].astype(np.float64), b[k].astype(np.float64)
        worst = max(worst, float(np.max(np.abs(x - y)) / max(np.max(np.abs(y)), 1e-2)))
    return worst


def check_shards(work):
    out = os.path.join(work, "shards")
    mpirun(1, ["preprocess", "--config", os.path.join(SRC, "configs", "tiny.ini"),
               "--input", os.path.join(DATA, "text", "wikitext-2", "wiki.test.raw"),
               "--tokenizer.vocab", os.path.join(DATA, "vocab", "bert-base-uncased-vocab.txt"),
               "--output", out, "--overwrite", "--quiet"])
    print("shards:", sorted(os.listdir(out)))


def check_exactness(work):
    runs = {"2 ranks x b": (2, 4), "1 rank x 2b": (1, 8), "1 rank x b x 2 accumulation": (1, 4)}
    weights = {}
    for name, (np_, micro) in runs.items():
        ck = os.path.join(work, name.replace(" ", "_"))
        shutil.rmtree(ck, ignore_errors=True)
        # The paper's peak LR: Adam turns absolute gradient rounding into update noise of
        # about lr / eps times that rounding, so the comparison is made at the real LR.
        mpirun(np_, pretrain_args(work, ck, **{"train.micro_batch_size": micro, "train.max_steps": 5,
                                               "checkpoint.every_steps": 5, "optimizer.lr": 1e-4}))
        weights[name] = checkpoint(ck, 5)[0]
    ref = weights["1 rank x 2b"]
    for name, w in weights.items():
        d = max_rel_diff(w, ref)
        print(f"{name}: max relative difference to 1 rank x 2b after 5 steps = {d:.3e}")
        if d > 1e-6:
            sys.exit(f"FAILED: {name} differs from 1 rank x 2b by {d:.3e} (> 1e-6)")
    print("exactness OK")


def cuda_visible():
    """Whether a CUDA device is visible (asks the reference Python's torch, then nvidia-smi)."""
    try:
        import torch
        return torch.cuda.is_available()
    except ImportError:
        return shutil.which("nvidia-smi") is not None and subprocess.run(
            ["nvidia-smi", "-L"], capture_output=True).returncode == 0


def check_exactness_cuda(work):
    if not cuda_visible():
        print("SKIPPED: no CUDA device visible (the GPU tier runs on a GPU host: launch/gpu_check.sh)")
        sys.exit(77)
    weights = {}
    for name, micro in (("1 rank x 2b", 8), ("1 rank x b x 2 accumulation", 4)):
        ck = os.path.join(work, name.replace(" ", "_"))
        shutil.rmtree(ck, ignore_errors=True)
        mpirun(1, pretrain_args(work, ck, **{"train.micro_batch_size": micro, "train.max_steps": 5,
                                             "checkpoint.every_steps": 5, "optimizer.lr": 1e-4,
                                             "train.device": "cuda", "train.tf32": "false"}))
        weights[name] = checkpoint(ck, 5)[0]
    d = max_rel_diff(weights["1 rank x b x 2 accumulation"], weights["1 rank x 2b"])
    print(f"CUDA: 1 rank x b x 2 accumulation vs 1 rank x 2b after 5 steps: max relative difference {d:.3e}")
    # GPU matmuls of different batch shapes may pick other kernels (other summation orders);
    # a wrong loss normalisation would differ by O(1), not 1e-4.
    if d > 1e-4:
        sys.exit(f"FAILED: on CUDA the accumulated steps differ from one micro-batch by {d:.3e} (> 1e-4)")
    print("exactness on CUDA OK")


def check_resume(work):
    straight, split = os.path.join(work, "straight"), os.path.join(work, "split")
    for d in (straight, split):
        shutil.rmtree(d, ignore_errors=True)
    dropout = {"model.hidden_dropout": 0.1, "model.attention_dropout": 0.1}  # the RNG must resume too
    mpirun(1, pretrain_args(work, straight, **dropout, **{"train.max_steps": 20}) + ["--resume", "none"])
    mpirun(1, pretrain_args(work, split, **dropout, **{"train.max_steps": 10}) + ["--resume", "none"])
    mpirun(1, pretrain_args(work, split, **dropout, **{"train.max_steps": 20}) + ["--resume", "auto"])
    a, b = checkpoint(straight, 20), checkpoint(split, 20)
    for part, x, y in (("weights", a[0], b[0]), ("optimizer state", a[1], b[1])):
        assert x.keys() == y.keys(), part
        for k in x:
            if not np.array_equal(x[k], y[k]):
                sys.exit(f"FAILED: {part} tensor {k} differs after resume (not bitwise)")
    for key in ("step", "scheduler_step", "loss_scaler", "data_position"):
        if a[2][key] != b[2][key]:
            sys.exit(f"FAILED: trainer state '{key}' differs: {a[2][key]} vs {b[2][key]}")
    print("resume bitwise OK: weights, optimizer state, LR step, loss scale, data position", a[2]["data_position"])
    check_build_records(split)

    # 2 ranks for 10 steps, then 1 rank: the same global sample sequence continues.
    two = os.path.join(work, "two_then_one")
    shutil.rmtree(two, ignore_errors=True)
    mpirun(2, pretrain_args(work, two, **{"train.max_steps": 10}) + ["--resume", "none"])
    p = mpirun(1, pretrain_args(work, two, **{"train.max_steps": 20}) + ["--resume", "auto"])
    one = os.path.join(work, "one_straight")
    shutil.rmtree(one, ignore_errors=True)
    mpirun(1, pretrain_args(work, one, **{"train.max_steps": 20}) + ["--resume", "none"])
    x, y = checkpoint(two, 20), checkpoint(one, 20)
    if x[2]["data_position"] != y[2]["data_position"]:
        sys.exit(f"FAILED: data position {x[2]['data_position']} vs {y[2]['data_position']}")
    d = max_rel_diff(x[0], y[0])
    print(f"2 ranks -> 1 rank: data position {x[2]['data_position']}, max relative weight difference {d:.3e}")
    if d > 1e-5:
        sys.exit("FAILED: 2 ranks then 1 rank did not continue the same sample sequence")
    check_world_size_change_with_dropout(work)
    check_world_size_change_bitwise(work)


def two_ranks_then(work, name, opts):
    """2 ranks to step 20 straight, and from its step-10 checkpoint on 1 and on 3 ranks to step
    20, with `opts`: (the straight run's checkpoint, {ranks: the resumed run's}) at step 20."""
    straight = os.path.join(work, f"{name}_two_straight")
    shutil.rmtree(straight, ignore_errors=True)
    mpirun(2, pretrain_args(work, straight, **opts, **{"train.max_steps": 20}) + ["--resume", "none"])
    got = {}
    for ranks in (1, 3):
        run = os.path.join(work, f"{name}_two_then_{ranks}")
        shutil.rmtree(run, ignore_errors=True)
        shutil.copytree(os.path.join(straight, "step_00000010"), os.path.join(run, "step_00000010"))
        mpirun(ranks, pretrain_args(work, run, **opts, **{"train.max_steps": 20}) + ["--resume", "auto"])
        got[ranks] = checkpoint(run, 20)
    return checkpoint(straight, 20), got


def check_world_size_change_bitwise(work):
    """dist.reduce_dtype fp64 with a fixed micro-batch of 2 rows (global batch 12), dropout
    0.1: 2 ranks to step 10, resumed on 1 and on 3 ranks to step 20 (6, 3 and 2 micro-steps a
    rank), equal 2 ranks throughout BITWISE, weights and Adam moments: every micro-batch holds
    the same samples at every world size and their gradients are summed in float64, rounded
    once. The fp32 sums of check_world_size_change_with_dropout differ by the summation order."""
    opts = {"model.hidden_dropout": 0.1, "model.attention_dropout": 0.1, "data.global_batch_size": 12,
            "train.micro_batch_size": 2, "optimizer.lr": 1e-4, "dist.reduce_dtype": "fp64"}
    ref, resumed = two_ranks_then(work, "fp64", opts)
    for ranks, got in resumed.items():
        for part, x, y in (("weights", got[0], ref[0]), ("optimizer state", got[1], ref[1])):
            if x.keys() != y.keys():
                sys.exit(f"FAILED: {part} tensor names differ on {ranks} rank(s)")
            differ = [k for k in x if not np.array_equal(x[k], y[k])]
            if differ:
                sys.exit(f"FAILED: dist.reduce_dtype fp64, 2 ranks -> {ranks} rank(s) at step 10: {part} not bitwise "
                         f"equal to 2 ranks throughout at step 20 ({len(differ)} tensors differ, e.g. {differ[0]}: "
                         f"max relative difference {max_rel_diff({'t': x[differ[0]]}, {'t': y[differ[0]]}):.3e})")
        if got[2]["data_position"] != ref[2]["data_position"]:
            sys.exit(f"FAILED: data position {got[2]['data_position']} vs {ref[2]['data_position']}")
        print(f"dist.reduce_dtype fp64, dropout 0.1, 2 ranks -> {ranks} rank(s) at step 10: weights and Adam moments "
              f"at step 20 bitwise equal to 2 ranks throughout")


def check_world_size_change_with_dropout(work):
    """Dropout 0.1: 2 ranks to step 10, resumed on 1 and on 3 ranks to step 20, equal the run
    on 2 ranks throughout up to summation order. Dropout masks are keyed by (step, global
    sample), not by rank, so each world size draws the same masks for the same sample. The
    micro-batch is derived (6, 12 and 4 rows: one global batch of 12), so the split differs too."""
    opts = {"model.hidden_dropout": 0.1, "model.attention_dropout": 0.1, "data.global_batch_size": 12,
            "train.micro_batch_size": 0, "optimizer.lr": 1e-4}
    ref, resumed = two_ranks_then(work, "dropout", opts)
    for ranks, got in resumed.items():
        d = max_rel_diff(got[0], ref[0])
        print(f"dropout 0.1, 2 ranks -> {ranks} rank(s) at step 10: max relative weight difference at step 20 "
              f"to 2 ranks throughout = {d:.3e}")
        if got[2]["data_position"] != ref[2]["data_position"] or d > 1e-6:
            sys.exit(f"FAILED: with dropout, resuming on {ranks} rank(s) differs from 2 ranks throughout by {d:.3e} "
                     "(> 1e-6): dropout must not depend on the rank")


def version_facts():
    """`tupe --version` as {key: value}, in trainer_state.json's key names."""
    p = subprocess.run([TUPE, "--version"], capture_output=True, text=True, check=True)
    lines = p.stdout.strip().split("\n")
    facts = {"tupe": lines[0].split(" ", 1)[1]}
    names = {"commit": "commit", "build type": "build_type", "LibTorch": "libtorch", "CUDA": "cuda", "NCCL": "nccl",
             "Open MPI": "openmpi", "HDF5": "hdf5"}
    for line in lines[1:]:
        label = next(k for k in names if line.startswith(k + " "))
        facts[names[label]] = line[len(label):].strip()
    return facts


def check_build_records(ckpt):
    """The run started twice (10 steps, then resumed to 20): its metrics start with a start
    record per start, naming the step it started from and the build as `tupe --version` says,
    and every checkpoint's trainer_state.json records the same build."""
    want = version_facts()
    records = [json.loads(line) for line in open(os.path.join(ckpt, "metrics", "rank_0.jsonl"))]
    starts = [(i, r) for i, r in enumerate(records) if r.get("event") == "start"]
    if [r["step"] for _, r in starts] != [0, 10] or starts[0][0] != 0:
        sys.exit(f"FAILED: metrics start records {[(i, r.get('step')) for i, r in starts]}, expected the first "
                 "record at step 0 and one at the resume step 10")
    for _, r in starts:
        if r["build"] != want:
            sys.exit(f"FAILED: metrics start record build {r['build']} != tupe --version {want}")
    for step in (10, 20):
        state = json.load(open(os.path.join(ckpt, f"step_{step:08d}", "trainer_state.json")))
        if state.get("build") != want:
            sys.exit(f"FAILED: step {step} trainer_state.json build {state.get('build')} != tupe --version {want}")
    print(f"build recorded: {want['commit']}, LibTorch {want['libtorch']}, Open MPI {want['openmpi']}, HDF5 "
          f"{want['hdf5']}: in 2 start records and 2 checkpoints")


def check_crash(work):
    ck = os.path.join(work, "crash")
    shutil.rmtree(ck, ignore_errors=True)
    mpirun(1, pretrain_args(work, ck, **{"train.max_steps": 10}) + ["--resume", "none"])
    env = dict(ENV, TUPE_TEST_CRASH_AFTER_FILES="2")  # die after model + optimizer files of step 20
    p = mpirun(1, pretrain_args(work, ck, **{"train.max_steps": 20}) + ["--resume", "auto"], check=False, env=env)
    if p.returncode == 0:
        sys.exit("FAILED: the crash injection did not end the run")
    whole = sorted(d for d in os.listdir(ck) if d.startswith("step_"))
    if whole != ["step_00000010"]:
        sys.exit(f"FAILED: after the crash the whole checkpoints are {whole}, expected only step_00000010")
    p = mpirun(1, pretrain_args(work, ck, **{"train.max_steps": 20}) + ["--resume", "auto"])
    if "resumed from" not in p.stdout or "step_00000010" not in p.stdout:
        sys.exit(f"FAILED: --resume auto did not take step 10:\n{p.stdout[-2000:]}")
    # The crashed run logged steps 11-20 before dying; the resume from step 10 logged them
    # again: the metrics hold each step once (the abandoned records dropped at the resume).
    steps = [json.loads(line)["step"] for line in open(os.path.join(ck, "metrics", "rank_0.jsonl"))
             if '"loss"' in line]
    if steps != list(range(1, 21)):
        sys.exit(f"FAILED: after a crash and a resume from step 10 the metrics' steps are {steps}, want 1..20 once")
    # A file damaged after its save (same size, one byte changed): --resume PATH refuses it
    # naming the file; --resume auto falls back to the older checkpoint and says why.
    model = os.path.join(ck, "step_00000020", "model.safetensors")
    size = os.path.getsize(model)
    with open(model, "r+b") as f:
        f.seek(size - 3)
        b = f.read(1)
        f.seek(size - 3)
        f.write(bytes([b[0] ^ 0x40]))
    p = mpirun(1, pretrain_args(work, ck, **{"train.max_steps": 30}) + ["--resume", os.path.dirname(model)],
               check=False)
    err = error_lines(p)
    if p.returncode == 0 or len(err) != 1 or "model.safetensors: SHA-256" not in err[0] or "damaged checkpoint" not in err[0]:
        sys.exit(f"FAILED: --resume PATH took a damaged checkpoint or said nothing useful:\n{p.stdout[-1000:]}\n{p.stderr[-1000:]}")
    check_damaged_newest_readers(work, ck)
    p = mpirun(2, pretrain_args(work, ck, **{"train.max_steps": 30}) + ["--resume", "auto"])
    # The skip is a warning (stderr, rank-tagged under 2 ranks): it survives --log-level warn.
    if ("tupe: rank 0: warning: resume auto: skipping a damaged checkpoint" not in p.stderr
            or "step_00000020/model.safetensors: SHA-256" not in p.stderr
            or "resumed from" not in p.stdout or "step_00000010 at step 10" not in p.stdout):
        sys.exit(f"FAILED: --resume auto did not skip the damaged step 20 for step 10:\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}")
    whole = sorted(d for d in os.listdir(ck) if d.startswith("step_"))
    if whole != ["step_00000010", "step_00000020", "step_00000030"]:
        sys.exit(f"FAILED: after the fallback run the checkpoints are {whole}")
    # A truncated file is reported too; with every checkpoint damaged, auto refuses to start
    # fresh over them; --resume none refuses a folder that holds checkpoints; "" is refused.
    os.truncate(os.path.join(ck, "step_00000030", "optimizer.safetensors"), 100)
    p = mpirun(1, pretrain_args(work, ck, **{"train.max_steps": 30}) + ["--resume", "auto", "--log-level", "warn"])
    if ("tupe: warning: resume auto: skipping a damaged checkpoint" not in p.stderr
            or "optimizer.safetensors: 100 bytes" not in p.stderr or p.stdout.strip()):
        sys.exit(f"FAILED: a truncated checkpoint was skipped without a warning (or --log-level warn printed info):\n"
                 f"{p.stdout[-2000:]}\n{p.stderr[-2000:]}")
    for step in (10, 20, 30):
        os.remove(os.path.join(ck, f"step_{step:08d}", "manifest.json"))
    for resume, expected in (("auto", "resume auto: none of the 3 checkpoint(s)"), ("", "--resume: empty"),
                             ("none", None)):
        p = mpirun(1, pretrain_args(work, ck, **{"train.max_steps": 40}) + ["--resume", resume], check=False)
        err = error_lines(p)
        if expected is None:  # no whole checkpoint left: a fresh start is allowed ...
            if p.returncode != 0:
                sys.exit(f"FAILED: --resume none in a folder without whole checkpoints:\n{p.stderr[-1500:]}")
            p = mpirun(1, pretrain_args(work, ck, **{"train.max_steps": 40}) + ["--resume", "none"], check=False)
            err = error_lines(p)
            expected = "already holds 4 checkpoint(s) (newest step 40)"  # ... but not a second one over it
        if p.returncode == 0 or len(err) != 1 or expected not in err[0]:
            sys.exit(f"FAILED: --resume '{resume}' was not refused with '{expected}':\n{p.stdout[-1000:]}\n"
                     f"{p.stderr[-1500:]}")
    # An unusable checkpoint.dir is found before step 1, not at the first save.
    blocker, metrics_dir = os.path.join(work, "a_file"), os.path.join(work, "blocked_metrics")
    open(blocker, "w").close()
    shutil.rmtree(metrics_dir, ignore_errors=True)
    p = mpirun(2, pretrain_args(work, os.path.join(blocker, "ck"),
                                **{"train.max_steps": 10, "train.metrics_dir": metrics_dir}) + ["--resume", "none"],
               check=False)
    metrics = os.path.join(metrics_dir, "rank_0.jsonl")
    trained = os.path.exists(metrics) and os.path.getsize(metrics) > 0
    if p.returncode == 0 or "cannot create the checkpoint folder" not in p.stderr or trained:
        sys.exit(f"FAILED: an unusable checkpoint.dir was not refused before step 1:\n{p.stderr[-1500:]}")
    print("crash OK: previous checkpoint taken after a crash and after a damaged file; damaged folders reported;"
          " unsafe fresh starts refused")


def check_damaged_newest_readers(work, ck):
    """With the newest checkpoint under `ck` (step 20) damaged after its save, export, predict
    and finetune given the folder take step 10 and warn, in pretrain --resume auto's words,
    naming the damaged file; a checkpoint path that is a file is called a file."""
    damaged = "skipping a damaged checkpoint: " + os.path.join(ck, "step_00000020", "model.safetensors") + ": SHA-256"
    hf = os.path.join(work, "hf_from_damaged")
    shutil.rmtree(hf, ignore_errors=True)
    p = mpirun(1, ["export", "--checkpoint", ck, "--output", hf])
    if damaged not in p.stderr or "step_00000010" not in p.stdout + p.stderr:
        sys.exit(f"FAILED: export did not warn of the damaged step 20 and take step 10:\n{p.stdout[-1500:]}\n{p.stderr[-1500:]}")
    lines = os.path.join(work, "fill.txt")
    open(lines, "w").write("the [MASK] of the city .\n")
    vocab = os.path.join(DATA, "vocab", "bert-base-uncased-vocab.txt")  # configs/ name ../../shared: not in every clone
    p = mpirun(1, ["predict", "--checkpoint", ck, "--mode", "fill-mask", "--input", lines, "--output",
                   os.path.join(work, "fill.jsonl"), "--vocab", vocab])
    if damaged not in p.stderr:
        sys.exit(f"FAILED: predict did not warn of the damaged step 20:\n{p.stdout[-1500:]}\n{p.stderr[-1500:]}")
    glue = os.path.join(work, "glue_from_damaged")
    shutil.rmtree(glue, ignore_errors=True)
    p = mpirun(2, ["finetune", "--config", os.path.join(SRC, "configs", "glue", "tiny.ini"), "--finetune.checkpoint", ck,
                   "--finetune.data_dir", os.path.join(DATA, "glue"), "--finetune.output_dir", glue,
                   "--finetune.train_rows", "64", "--finetune.epochs", "1", "--finetune.predict_test", "false",
                   "--finetune.save_model", "false", "--tokenizer.vocab", vocab])
    if damaged not in p.stderr or p.stderr.count("skipping a damaged checkpoint") != 1:
        sys.exit(f"FAILED: finetune on 2 ranks did not warn once of the damaged step 20:\n{p.stdout[-1500:]}\n"
                 f"{p.stderr[-1500:]}")
    results = json.load(open(os.path.join(glue, "results.json")))
    if "step_00000010" not in json.dumps(results):
        sys.exit(f"FAILED: finetune's results.json does not name step_00000010: {json.dumps(results)[:800]}")
    p = mpirun(1, ["export", "--checkpoint", os.path.join(ck, "step_00000010", "manifest.json"), "--output", hf + "2"],
               check=False)
    if p.returncode == 0 or "a file, not a checkpoint folder" not in p.stderr:
        sys.exit(f"FAILED: a checkpoint path that is a file:\n{p.stderr[-1000:]}")
    print("export, predict and finetune skip the damaged newest checkpoint with the warning, and take step 10")


def check_signal(work):
    ck = os.path.join(work, "signal")
    shutil.rmtree(ck, ignore_errors=True)
    cmd = ["mpirun", "-np", "2", "--oversubscribe", "--bind-to", "none", TUPE] + \
        pretrain_args(work, ck, **{"train.max_steps": 100000, "optimizer.total_steps": 100000,
                                   "checkpoint.every_steps": 0}) + ["--resume", "none"]
    proc = subprocess.Popen(cmd, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    metrics = os.path.join(ck, "metrics", "rank_0.jsonl")
    deadline = time.time() + 120
    while time.time() < deadline and not (os.path.exists(metrics) and os.path.getsize(metrics) > 0):
        time.sleep(0.5)
    proc.send_signal(signal.SIGUSR1)  # mpirun forwards SIGUSR1 to the ranks (SLURM's srun sends SIGTERM directly)
    out, _ = proc.communicate(timeout=120)
    steps = sorted(d for d in os.listdir(ck) if d.startswith("step_"))
    if not steps or "stopped by signal" not in out:
        sys.exit(f"FAILED: no checkpoint after SIGUSR1 (exit {proc.returncode}):\n{out[-2000:]}")
    stopped = int(steps[-1][5:])
    p = mpirun(1, pretrain_args(work, ck, **{"train.max_steps": stopped + 3, "optimizer.total_steps": 100000,
                                              "checkpoint.every_steps": 0}) + ["--resume", "auto"])
    if f"at step {stopped}" not in p.stdout:
        sys.exit(f"FAILED: resume after the signal did not start at step {stopped}:\n{p.stdout[-2000:]}")
    print(f"signal OK: stopped at step {stopped} with a checkpoint, resumed to {stopped + 3}")


def check_signal_setup(work):
    """SIGTERM while the job sets up (at its first output line, before the training loop):
    the rank is not killed by the signal; the stop is taken at the first step boundary, with
    a checkpoint at the step reached (step 0 when setup was still running), and --resume auto
    continues from it."""
    ck = os.path.join(work, "signal_setup")
    shutil.rmtree(ck, ignore_errors=True)
    cmd = [TUPE] + pretrain_args(work, ck, **{"train.max_steps": 100000, "optimizer.total_steps": 100000,
                                             "checkpoint.every_steps": 0}) + ["--resume", "none"]
    proc = subprocess.Popen(cmd, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    first = proc.stdout.readline()
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=120)
    out = first + out
    stop = [line for line in out.splitlines() if "stopped by signal at step" in line]
    if proc.returncode != 0 or not stop:
        sys.exit(f"FAILED: SIGTERM during setup: exit {proc.returncode} (negative: killed by the signal):\n{out[-2000:]}")
    stopped = int(stop[0].split("stopped by signal at step ")[1].split(";")[0].split()[0])
    if not os.path.isdir(os.path.join(ck, f"step_{stopped:08d}")):
        sys.exit(f"FAILED: no checkpoint at step {stopped} after the signal:\n{out[-2000:]}")
    p = mpirun(1, pretrain_args(work, ck, **{"train.max_steps": stopped + 2, "optimizer.total_steps": 100000,
                                              "checkpoint.every_steps": 0}) + ["--resume", "auto"])
    if f"finished at step {stopped + 2}" not in p.stdout:
        sys.exit(f"FAILED: resume after the signal in setup did not finish at {stopped + 2}:\n{p.stdout[-2000:]}")
    print(f"signal_setup OK: SIGTERM at the first line ({first.strip()[:60]!r}) stopped at step {stopped} "
          f"with a checkpoint; resumed to {stopped + 2}")


def check_watchdog(work):
    ck = os.path.join(work, "watchdog")
    shutil.rmtree(ck, ignore_errors=True)
    t0 = time.time()
    # The stall is test-only fault injection from the environment (dist/stall_injection.h).
    p = mpirun(2, pretrain_args(work, ck, **{"train.max_steps": 20, "dist.timeout_s": 3}) + ["--resume", "none"],
               check=False, timeout=300, env=dict(ENV, TUPE_TEST_STALL="rank=1,step=4"))
    took = time.time() - t0
    text = p.stdout + p.stderr
    if p.returncode == 0 or "watchdog" not in text or "step 4" not in text:
        sys.exit(f"FAILED: stalled job exit {p.returncode} after {took:.0f}s:\n{text[-3000:]}")
    print(f"watchdog OK: ended in {took:.1f}s:", [l for l in text.splitlines() if "watchdog" in l][:1])


def check_learns(work):
    ck = os.path.join(work, "learns")
    shutil.rmtree(ck, ignore_errors=True)
    mpirun(2, pretrain_args(work, ck, **{"model.hidden_size": 64, "model.ffn_size": 256, "train.max_steps": 60,
                                          "optimizer.total_steps": 60, "data.global_batch_size": 16,
                                          "train.micro_batch_size": 8, "precision.precision": "bf16",
                                          "model.hidden_dropout": 0.1, "model.attention_dropout": 0.1,
                                          "data.validation_shards": f"{work}/../shards", "train.eval_every": 60,
                                          "train.eval_batches": 4}) + ["--resume", "none"])
    records = [json.loads(l) for l in open(os.path.join(ck, "metrics", "rank_0.jsonl"))]
    losses = [r["loss"] for r in records if "loss" in r]
    val = [r["validation_loss"] for r in records if "validation_loss" in r]
    first, last = np.mean(losses[:5]), np.mean(losses[-5:])
    print(f"MLM loss: first 5 steps {first:.3f}, last 5 steps {last:.3f}; validation {val}")
    if not last < first - 1.0:
        sys.exit(f"FAILED: loss did not fall clearly ({first:.3f} -> {last:.3f})")
    if not val or not val[-1] < first - 1.0:
        sys.exit(f"FAILED: validation loss {val} not clearly below the initial {first:.3f}")


def check_validation(work):
    ck = os.path.join(work, "validation")
    shutil.rmtree(ck, ignore_errors=True)
    # Micro-batches of 2 rows (2 accumulation steps a rank): evaluation takes whole batches.
    mpirun(2, pretrain_args(work, ck, **{"train.max_steps": 4, "checkpoint.every_steps": 4,
                                          "train.micro_batch_size": 2, "data.validation_shards": f"{work}/../shards",
                                          "train.eval_every": 4, "train.eval_batches": 5}) + ["--resume", "none"])
    records = [json.loads(l) for l in open(os.path.join(ck, "metrics", "rank_0.jsonl"))]
    logged = [r["validation_loss"] for r in records if "validation_loss" in r]
    if len(logged) != 1:
        sys.exit(f"FAILED: expected one validation record, got {logged}")
    p = subprocess.run([os.environ["TUPE_VALIDATION_REFERENCE"], os.path.join(ck, "step_00000004")],
                       capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        sys.exit(f"FAILED: validation_reference exit {p.returncode}: {p.stderr[-2000:]}")
    ref = json.loads(p.stdout)
    rel = abs(logged[0] - ref["validation_loss"]) / ref["validation_loss"]
    print(f"validation loss: job {logged[0]:.9f}, float64 recomputation {ref['validation_loss']:.9f} over "
          f"{ref['masked']} masked tokens in {ref['steps']} steps; relative difference {rel:.2e}")
    if not rel <= 1e-6:
        sys.exit(f"FAILED: the job's validation loss differs from the recomputation by {rel:.2e} (> 1e-6)")
    print("validation OK")


def tensorboard_scalars(folder):
    """{tag: [(step, value)]} of every event file under `folder`, read by TensorBoard's own
    EventAccumulator (so the file's framing, CRCs and schema are TensorBoard's to judge)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    acc = EventAccumulator(folder, size_guidance={"scalars": 0})
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def expect_scalars(got, want, what):
    """`want`: {tag: [(step, float64 value)]}; TensorBoard keeps float32, so each value must be
    the float32 rounding of the JSON's, exactly."""
    if set(got) != set(want):
        sys.exit(f"FAILED: {what}: TensorBoard tags {sorted(got)} != expected {sorted(want)}")
    for tag, points in want.items():
        expected = [(step, float(np.float32(v))) for step, v in points]
        if got[tag] != expected:
            sys.exit(f"FAILED: {what}: {tag}: TensorBoard {got[tag][:5]}... != JSONL {expected[:5]}...")


def check_tensorboard(work):
    """pretrain and finetune write TensorBoard scalars equal to their JSONL / results.json;
    train.tensorboard false and finetune.tensorboard false write none."""
    ck = os.path.join(work, "tb")
    shutil.rmtree(ck, ignore_errors=True)
    mpirun(2, pretrain_args(work, ck, **{"train.max_steps": 20, "optimizer.total_steps": 20, "train.log_every": 5,
                                          "data.validation_shards": f"{work}/../shards", "train.eval_every": 10,
                                          "train.eval_batches": 2}) + ["--resume", "none"])
    want = {}
    for line in open(os.path.join(ck, "metrics", "rank_0.jsonl")):
        r = json.loads(line)
        for k, v in r.items():
            if k in ("step", "epoch") or isinstance(v, bool) or not isinstance(v, (int, float)):
                continue
            tag = "validation/" + k[len("validation_"):] if k.startswith("validation_") else "train/" + k
            want.setdefault(tag, []).append((r["step"], v))
    got = tensorboard_scalars(os.path.join(ck, "tensorboard"))
    expect_scalars(got, want, "pretrain")
    for tag in ("train/loss", "train/lr", "train/grad_norm", "train/loss_scale", "train/skipped_steps",
                "train/tokens_per_s", "validation/loss"):
        if tag not in got:
            sys.exit(f"FAILED: pretrain: no {tag} in TensorBoard ({sorted(got)})")
    print(f"pretrain: {len(got)} TensorBoard tags, {sum(map(len, got.values()))} scalars equal to the JSONL")

    off = os.path.join(work, "tb_off")
    shutil.rmtree(off, ignore_errors=True)
    mpirun(1, pretrain_args(work, off, **{"train.max_steps": 2, "optimizer.total_steps": 2, "optimizer.warmup_steps": 1,
                                           "train.tensorboard": "false"}) + ["--resume", "none"])
    if os.path.exists(os.path.join(off, "tensorboard")):
        sys.exit("FAILED: train.tensorboard false still wrote " + os.path.join(off, "tensorboard"))

    glue = os.path.join(work, "tb_glue")
    shutil.rmtree(glue, ignore_errors=True)
    vocab = os.path.join(DATA, "vocab", "bert-base-uncased-vocab.txt")
    args = ["finetune", "--config", os.path.join(SRC, "configs", "glue", "tiny.ini"), "--finetune.tasks", "RTE",
            "--finetune.checkpoint", os.path.join(ck, "step_00000020"), "--finetune.data_dir",
            os.path.join(DATA, "glue"), "--tokenizer.vocab", vocab, "--finetune.output_dir", glue,
            "--finetune.train_rows", "64", "--finetune.epochs", "2", "--finetune.predict_test", "false",
            "--finetune.save_model", "false", "--finetune.threads", "1"]
    mpirun(1, args)
    results = json.load(open(os.path.join(glue, "results.json")))
    runs = [(t["task"], run) for t in results["tasks"] for run in t["runs"]]
    for task, run in runs:
        want = {"train/loss": [], "train/learning_rate": []}
        for e in run["epochs"]:
            want["train/loss"].append((e["epoch"], e["train_loss"]))
            want["train/learning_rate"].append((e["epoch"], e["learning_rate"]))
            for split, metrics in e["dev"].items():
                for metric, v in metrics.items():
                    want.setdefault(f"dev/{split}/{metric}", []).append((e["epoch"], v))
        folder = os.path.join(glue, "tensorboard", task, f"lr{run['lr']:g}_seed{run['seed']}")
        expect_scalars(tensorboard_scalars(folder), want, f"finetune {task} lr {run['lr']:g} seed {run['seed']}")
    print(f"finetune: {len(runs)} run(s), TensorBoard equal to results.json per epoch")
    shutil.rmtree(glue)
    mpirun(1, args + ["--finetune.tensorboard", "false"])
    if os.path.exists(os.path.join(glue, "tensorboard")):
        sys.exit("FAILED: finetune.tensorboard false still wrote " + os.path.join(glue, "tensorboard"))
    print("tensorboard OK")


def check_warnings(work):
    import h5py
    v2 = os.path.join(work, "v2")
    shutil.rmtree(v2, ignore_errors=True)
    os.makedirs(v2)
    shards = os.path.join(work, "..", "shards")
    for name in sorted(os.listdir(shards)):
        if not name.startswith("train-"):
            continue
        path = os.path.join(v2, name)
        shutil.copy(os.path.join(shards, name), path)
        with h5py.File(path, "r+") as f:  # what format version 2 wrote: no per-sample checksums
            del f["sample_checksums"]
            dtype = f.attrs["format_version"].dtype
            f.attrs.create("format_version", 2, dtype=dtype)
    # tiny.ini with lower_case = false: the uncased shards contradict it, and a config file yields.
    text = open(os.path.join(SRC, "configs", "tiny.ini")).read()
    assert "lower_case = true" in text
    cfg = os.path.join(work, "tiny_cased.ini")
    vocab = os.path.join(DATA, "vocab", "bert-base-uncased-vocab.txt")
    with open(cfg, "w") as f:
        for line in text.replace("lower_case = true", "lower_case = false").splitlines():
            f.write(("vocab = " + vocab if line.startswith("vocab = ") else line) + "\n")
    ck = os.path.join(work, "ck")
    shutil.rmtree(ck, ignore_errors=True)
    args = pretrain_args(work, ck, **{"data.train_shards": v2, "train.max_steps": 2})
    args[args.index("--config") + 1] = cfg
    p = mpirun(2, args)
    for what in ("read unverified", "tokenizer.lower_case = false of " + cfg):
        n = p.stderr.count(what)
        print(f"'{what}': {n} time(s) from 2 ranks")
        if n != 1:
            sys.exit(f"FAILED: '{what}' printed {n} times, not once\n{p.stderr[-3000:]}")
    effective = open(os.path.join(ck, "effective_config.ini")).read()
    section = effective[effective.index("[tokenizer]"):].split("\n\n")[0]
    print("effective_config.ini:", section.replace("\n", "; "))
    if "lower_case = true" not in section.splitlines():
        sys.exit(f"FAILED: effective_config.ini does not show the shards' lower_case = true:\n{section}")
    state = json.load(open(os.path.join(ck, "step_00000002", "trainer_state.json")))
    if state["config"]["tokenizer.lower_case"] != "true":
        sys.exit(f"FAILED: the checkpoint's config says {state['config']['tokenizer.lower_case']}")
    print("warnings once per job OK; effective_config.ini shows the shards' tokenizer")


def check_mfu(work):
    clock_ghz = max(float(l.split(":")[1]) for l in open("/proc/cpuinfo") if l.startswith("cpu MHz")) / 1000
    try:
        clock_ghz = max(clock_ghz, int(open("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq").read()) / 1e6)
    except OSError:
        pass
    for precision in ("fp32", "bf16"):
        shutil.rmtree(os.path.join(work, precision), ignore_errors=True)
        cache = os.path.join(work, precision, "cache")  # empty: nothing measured before
        os.makedirs(cache)
        ck = os.path.join(work, precision, "ckpt")
        args = pretrain_args(work, ck, **{"precision.precision": precision, "train.max_steps": 3,
                                                  "checkpoint.every_steps": 0, "train.threads": 2, "train.progress": "true"})
        args += ["--resume", "none"]
        cmd = ["mpirun", "-np", "1", "--oversubscribe", "--bind-to", "none", TUPE] + args
        p = subprocess.Popen(cmd, env=dict(ENV, TUPE_CACHE=cache), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True)
        stamps, lines = {}, []
        for line in p.stdout:
            lines.append(line.rstrip())
            now = time.monotonic()
            if "# effective config:" in line:
                stamps.setdefault("config", now)
            if "step 1/3 " in line:
                stamps.setdefault("step1", now)
        if p.wait() != 0:
            sys.exit(f"FAILED: {' '.join(cmd)}\n" + "\n".join(lines[-20:]))
        if "config" not in stamps or "step1" not in stamps:
            sys.exit("FAILED: no effective-config line or no step-1 line in:\n" + "\n".join(lines[-20:]))
        startup = stamps["step1"] - stamps["config"]
        print(f"{precision}: step 1 logged {startup:.1f} s after the effective-config line")
        if startup > 10:
            sys.exit(f"FAILED: {precision}: {startup:.1f} s from the effective-config line to step 1 (at most 10)")
        recs = [json.loads(l) for l in open(os.path.join(ck, "metrics", "rank_0.jsonl")) if '"loss"' in l]
        if len(recs) != 3:
            sys.exit(f"FAILED: {len(recs)} log records, want 3")
        for r in recs:
            src = r["mfu_peak_source"]
            # "CPU figures: 2 thread(s) x 3.644 GHz (measured; /proc/cpuinfo says 2.596) x 32 fp32 FLOP/cycle (...)"
            threads = int(src.split("CPU figures: ")[1].split(" thread")[0]) if src.startswith("CPU figures: ") else 0
            clock = float(src.split(" thread(s) x ")[1].split(" GHz")[0]) if threads else 0
            per_cycle = float(src.split(" FLOP/cycle")[0].split(" x ")[-1].split()[0]) if threads else 0
            want_peak = threads * clock * per_cycle / 1e3
            mfu = r["flops_per_token"] * r["tokens_per_s"] / (r["mfu_peak_tflops"] * 1e12)
            print(f"  step {r['step']}: MFU {r['mfu']:.4%} (peak {r['mfu_peak_tflops']:.4g} TFLOP/s: {src})")
            # The clock is the highest of /proc/cpuinfo's (and cpufreq's) and the probe's: never
            # below what the system reports, never above any shipped boost clock.
            if not (threads == 2 and f" {precision} FLOP/cycle" in src and clock_ghz - 5e-4 <= clock < 7.0 and
                    abs(r["mfu_peak_tflops"] - want_peak) <= 1e-3 * want_peak):
                sys.exit(f"FAILED: the peak {r['mfu_peak_tflops']} is not 2 threads x a clock of at least "
                         f"{clock_ghz} GHz x the FLOPs/cycle it names: {src}")
            if not (0 < r["mfu"] <= 1 and abs(mfu - r["mfu"]) <= 1e-6 * mfu):
                sys.exit(f"FAILED: MFU {r['mfu']} (recomputed {mfu}) is not in (0, 1]")
        if os.listdir(cache):
            sys.exit(f"FAILED: the run wrote into $TUPE_CACHE: {os.listdir(cache)}")
    print("MFU: instant start, honest figures OK")


if __name__ == "__main__":
    check, work = sys.argv[1], os.path.abspath(sys.argv[2])
    os.makedirs(work, exist_ok=True)
    globals()["check_" + check](work)
