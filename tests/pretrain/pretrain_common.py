"""What the end-to-end checks of `tupe pretrain` share: the executable, the environment for
mpirun as root, a tiny TUPE-R's arguments, and readers of what a run wrote (checkpoints,
`tupe --version`). Environment: TUPE_BIN (the tupe executable), TUPE_SOURCE_DIR,
TUPE_SHARED_DATA."""
import json
import os
import shutil
import subprocess
import sys

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


def cuda_visible():
    """Whether a CUDA device is visible (asks the reference Python's torch, then nvidia-smi)."""
    try:
        import torch
        return torch.cuda.is_available()
    except ImportError:
        return shutil.which("nvidia-smi") is not None and subprocess.run(
            ["nvidia-smi", "-L"], capture_output=True).returncode == 0


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
