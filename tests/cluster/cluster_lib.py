"""Helpers of the cluster tier: a simulated cluster (launch/sim_cluster.sh) that is always
stopped, tiny `tupe pretrain` command lines, and checks of what the runs wrote.

Every cluster is started in the foreground of this process (`sim_cluster.sh start
--foreground`, which dies with us: PR_SET_PDEATHSIG) and stopped by `down` in a finally
block, also on SIGTERM (CTest's timeout) and on a failed check; `down` fails when any process
of the cluster is left, and so does the check.
"""
import ctypes
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
from safetensors.numpy import load_file

# Real paths: the nodes see this machine's folders bound at their real places, so a path through
# a symbolic link (a ../shared that links to a folder elsewhere) would not resolve on a node.
TUPE = os.path.realpath(os.environ["TUPE_BIN"])
SRC = os.path.realpath(os.environ["TUPE_SOURCE_DIR"])
DATA = os.path.realpath(os.environ.get("TUPE_SHARED_DATA", os.path.join(SRC, "..", "shared", "data")))
SIM = os.path.join(SRC, "launch", "sim_cluster.sh")
TUPE_MPIRUN = os.path.join(SRC, "launch", "tupe-mpirun")
SKIP = 77
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_btl_vader_single_copy_mechanism="none", OMP_NUM_THREADS="1", TUPE_PROGRESS="lines")


def fail(message):
    raise SystemExit(f"FAILED: {message}")


def _on_term(signum, frame):
    raise SystemExit(f"FAILED: stopped by signal {signum} (test timeout?)")


signal.signal(signal.SIGTERM, _on_term)


def _die_with_parent():
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def require_namespaces():
    """Exit 77 (CTest: skipped) with sim_cluster.sh's one line where namespaces are refused."""
    p = subprocess.run(["bash", SIM, "check"], capture_output=True, text=True)
    if p.returncode == SKIP:
        print("SKIPPED: " + p.stderr.strip())
        sys.exit(SKIP)
    if p.returncode != 0:
        fail(f"sim_cluster.sh check: exit {p.returncode}: {p.stderr.strip()}")


def shared_folders(work):
    """The folders the nodes must see as this machine's: the checkout, the build, the data and
    the test's work folder (sim_cluster.sh binds those under /tmp into each node's /tmp)."""
    build = os.path.dirname(os.path.dirname(os.path.realpath(TUPE)))  # BUILD/cli/tupe
    os.makedirs(work, exist_ok=True)
    return [f for f in (SRC, build, DATA, work) if os.path.isdir(f)]


class Cluster:
    """N simulated nodes (node1..nodeN) with the state folder WORK/NAME; a context manager."""

    def __init__(self, work, name, nodes, slurm=False):
        self.dir = os.path.join(work, name)
        self.nodes = nodes
        subprocess.run(["bash", SIM, "down", self.dir], capture_output=True)  # a previous run killed hard
        shutil.rmtree(self.dir, ignore_errors=True)
        cmd = ["bash", SIM, "start", self.dir, "--nodes", str(nodes), "--foreground"] + (["--slurm"] if slurm else [])
        for folder in shared_folders(work):
            cmd += ["--share", folder]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=ENV,
                                     preexec_fn=_die_with_parent)
        line = self.proc.stdout.readline()
        if "up in" not in line:
            rest = self.proc.communicate(timeout=60)[0]
            fail(f"the cluster did not start: {line}{rest}")
        self.scratch = os.path.join(self.dir, "scratch")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.down()
        return False

    def down(self):
        if self.proc is None:
            return
        p = subprocess.run(["bash", SIM, "down", self.dir], capture_output=True, text=True, timeout=120)
        self.proc.wait(timeout=60)
        self.proc = None
        print(p.stdout.strip() or p.stderr.strip())
        if p.returncode != 0:
            fail(f"sim_cluster.sh down: {p.stderr.strip()}")

    def cmd(self, host, args):
        return ["bash", SIM, "exec", self.dir, host] + [str(a) for a in args]

    def run(self, host, args, timeout=300, check=True):
        t0 = time.time()
        p = subprocess.run(self.cmd(host, args), capture_output=True, text=True, timeout=timeout, env=ENV)
        p.wall_s = time.time() - t0
        if check and p.returncode != 0:
            fail(f"on {host}: {' '.join(map(str, args))}\nexit {p.returncode}\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
        return p

    def popen(self, host, args):
        """A job in the background. Its output goes to files, not pipes: a process left on an
        unreachable node may hold a pipe open after the job ended."""
        return Job(self.cmd(host, args), os.path.join(self.dir, f"job-{time.time_ns()}"))

    def fault(self, what, node, *extra):
        p = subprocess.run(["bash", SIM, what, self.dir, node, *extra], capture_output=True, text=True, timeout=60)
        if p.returncode != 0:
            fail(f"sim_cluster.sh {what} {node}: {p.stderr.strip()}")
        print(p.stdout.strip())

    def mpirun(self, hosts, args, first=None):
        """mpirun on the first host of `hosts` ({"node1": 2, ...}) with the cluster's settings."""
        spec = ",".join(f"{h}:{n}" for h, n in hosts.items())
        return [first or next(iter(hosts)), ["mpirun", "--host", spec, "-np", sum(hosts.values()),
                                             "--bind-to", "none", TUPE] + args]

    def tupe_mpirun(self, work, hosts, per_node, args):
        """launch/tupe-mpirun with a hostfile of `hosts`, `per_node` CPU ranks each."""
        hostfile = os.path.join(work, "hosts-" + "-".join(hosts))
        with open(hostfile, "w") as f:
            f.writelines(f"{h} slots={per_node}\n" for h in hosts)
        return [hosts[0], [TUPE_MPIRUN, "--hostfile", hostfile, "--gpus-per-node", 0, "--cpu-ranks", per_node, "--",
                           TUPE] + args]


class Job:
    """A command with stdout and stderr in files; poll() and communicate(timeout) as Popen's."""

    def __init__(self, cmd, prefix):
        self.out_path, self.err_path = prefix + ".out", prefix + ".err"
        with open(self.out_path, "w") as out, open(self.err_path, "w") as err:
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=err, stdin=subprocess.DEVNULL, text=True, env=ENV)

    @property
    def returncode(self):
        return self.proc.returncode

    def poll(self):
        return self.proc.poll()

    def kill(self):
        self.proc.kill()

    def communicate(self, timeout=None):
        self.proc.wait(timeout=timeout)
        return open(self.out_path).read(), open(self.err_path).read()


def pretrain_args(shards, ckpt, **overrides):
    """A tiny TUPE-R on the test shards, fp32, dropout off, short collective timeout."""
    opts = {
        "model.hidden_size": 32, "model.num_layers": 2, "model.num_heads": 4, "model.ffn_size": 64,
        "model.hidden_dropout": 0.0, "model.attention_dropout": 0.0,
        "data.train_shards": shards, "data.validation_shards": "", "data.global_batch_size": 8,
        "optimizer.warmup_steps": 5, "optimizer.total_steps": 1000, "optimizer.lr": 1e-4,
        "precision.precision": "fp32", "checkpoint.dir": ckpt, "checkpoint.every_steps": 5,
        "checkpoint.keep_last": 0, "train.micro_batch_size": 2, "train.log_every": 1, "train.threads": 1,
        "train.progress": "false", "dist.timeout_s": 30,
    }
    opts.update(overrides)
    if "optimizer.total_steps" not in overrides:  # the LR schedule covers every step of a long run
        opts["optimizer.total_steps"] = max(1000, int(opts.get("train.max_steps", 0)))
    args = ["pretrain", "--config", os.path.join(SRC, "configs", "tiny.ini")]
    for k, v in opts.items():
        args += [f"--{k}", str(v)]
    return args


def single_rank(args, timeout=300):
    """`tupe` as one process outside the cluster."""
    p = subprocess.run([TUPE] + args, capture_output=True, text=True, env=ENV, timeout=timeout)
    if p.returncode != 0:
        fail(f"tupe {' '.join(args)}\nexit {p.returncode}\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}")
    return p


def step_dir(ckpt, step):
    return os.path.join(ckpt, f"step_{step:08d}")


def whole_checkpoints(ckpt):
    """Steps of the checkpoints under `ckpt` whose manifest exists, oldest first."""
    if not os.path.isdir(ckpt):
        return []
    return sorted(int(d[5:]) for d in os.listdir(ckpt)
                  if d.startswith("step_") and os.path.exists(os.path.join(ckpt, d, "manifest.json")))


def verify_manifest(path):
    """Every file the manifest lists has its recorded size and SHA-256 (hashlib)."""
    manifest = json.load(open(os.path.join(path, "manifest.json")))
    for name, entry in manifest["files"].items():
        data = open(os.path.join(path, name), "rb").read()
        if len(data) != entry["bytes"] or hashlib.sha256(data).hexdigest() != entry["sha256"]:
            fail(f"{path}/{name}: size or SHA-256 differs from its manifest")
    return sorted(manifest["files"])


def weights(ckpt, step):
    return load_file(os.path.join(step_dir(ckpt, step), "model.safetensors"))


def state(ckpt, step):
    return json.load(open(os.path.join(step_dir(ckpt, step), "trainer_state.json")))


def max_rel_diff(a, b):
    """Largest per-tensor max|a - b| / max(max|b|, 1e-2) (tests/pretrain's measure)."""
    if a.keys() != b.keys():
        fail(f"tensor names differ: {sorted(a.keys() ^ b.keys())}")
    worst = 0.0
    for k in a:
        x, y = a[k].astype(np.float64), b[k].astype(np.float64)
        worst = max(worst, float(np.max(np.abs(x - y)) / max(np.max(np.abs(y)), 1e-2)))
    return worst


def wait_for(predicate, timeout, what, proc=None):
    t0 = time.time()
    while time.time() - t0 < timeout:
        if predicate():
            return time.time() - t0
        if proc is not None and proc.poll() is not None:
            out, err = proc.communicate()
            fail(f"the job ended (exit {proc.returncode}) before {what}:\n{out[-2000:]}\n{err[-2000:]}")
        time.sleep(0.2)
    fail(f"{what} did not happen within {timeout} s")


def ended_within(proc, limit, what):
    """Waits up to `limit` s for `proc`; its (wall seconds, stdout, stderr). A hang fails."""
    t0 = time.time()
    try:
        out, err = proc.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate(timeout=30)
        fail(f"{what}: the job was still running after {limit} s (a hang)\n{out[-1500:]}\n{err[-1500:]}")
    return time.time() - t0, out, err


def last_line(text):
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""
