"""Past start-up, a slow rank is waited for and a frozen one ends the job (dist/heartbeat.h),
in preprocess, verify and evaluate.

Usage: frozen_rank_checks.py WORKDIR
The test hook TUPE_TEST_STALL="rank=R,phase=work,..." acts when the job's work begins
(MpiEnv::end_startup): with seconds=T rank R sleeps (a slow rank: its heartbeat thread goes on),
with freeze=1 it stops itself with SIGSTOP (a frozen node: its heartbeat stops too).
TUPE_HEARTBEAT_TIMEOUT_S=5 throughout.
  slow preprocess     rank 2 of 3 sleeps 12 s: the job ends 0 (slow is not gone)
  frozen preprocess   rank 2 of 3 stops: mpirun exits non-zero within 5 + 25 s, rank 0's line
                      names rank 2, its host and what rank 0 was doing; no process is left;
                      the next run into the folder takes the lock over and leaves no temporary
                      shard of the frozen run
  frozen verify       rank 1 of 3 stops while the shards are verified: the same line for rank 1
  frozen evaluate     rank 1 of 2 stops: the line names rank 1
  frozen pretrain     rank 1 of 2 stops: pretrain has no heartbeat (dist/heartbeat.h); its
  frozen finetune     collectives are the watchdog's, so with dist.timeout_s = 5 the job ends within
                      5 + 25 s with the watchdog's line naming the collective that waited, and no
                      process is left
Environment: TUPE_BIN, TUPE_SOURCE_DIR, TUPE_SHARED_DATA.
"""
import glob
import os
import shutil
import socket
import subprocess
import sys
import time

TUPE = os.environ["TUPE_BIN"]
SRC = os.environ["TUPE_SOURCE_DIR"]
DATA = os.environ["TUPE_SHARED_DATA"]
VOCAB = os.path.join(DATA, "vocab", "bert-base-uncased-vocab.txt")
GLUE = os.path.join(DATA, "glue")
TIMEOUT_S = 5
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_btl_vader_single_copy_mechanism="none", OMP_NUM_THREADS="1",
           TUPE_HEARTBEAT_TIMEOUT_S=str(TIMEOUT_S))
HOST = socket.gethostname()


def check(cond, what, detail=""):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        sys.exit("FAILED: " + what + ("\n" + detail[-3000:] if detail else ""))


def leftovers(marker_text):
    """Processes whose command line holds `marker_text` (a job's unique folder)."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            cmd = open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if marker_text in cmd and "frozen_rank_checks" not in cmd:
            found.append(int(pid))
    return found


def mpirun(np_, args, stall=None, timeout=600):
    env = dict(ENV, TUPE_TEST_STALL=stall) if stall else ENV
    cmd = ["mpirun", "-np", str(np_), "--oversubscribe", "--bind-to", "none", TUPE] + [str(a) for a in args]
    t0 = time.time()
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    p.took = time.time() - t0
    p.text = p.stdout + p.stderr
    return p


def run_frozen(name, np_, rank, args):
    """Runs `args` on np_ ranks with `rank` frozen at work; checks it ends non-zero in time."""
    p = mpirun(np_, args, stall=f"rank={rank},phase=work,freeze=1")
    check(p.returncode != 0, f"{name}: the job with a frozen rank {rank} ends non-zero (exit {p.returncode})", p.text)
    check(p.took < TIMEOUT_S + 25, f"{name}: it ends {p.took:.1f} s after it started (bound {TIMEOUT_S} + 25 s)",
          p.text)
    return p


def nothing_left(name, unique):
    deadline = time.time() + 15
    while leftovers(unique) and time.time() < deadline:
        time.sleep(0.2)
    left = leftovers(unique)
    for pid in left:
        os.kill(pid, 9)
    check(not left, f"{name}: no process of the job is left (stopped ones included)")


def frozen(name, np_, rank, args, unique, command):
    """A job with a heartbeat: rank 0's line names the frozen rank, its host and its own activity."""
    p = run_frozen(name, np_, rank, args)
    lines = [line for line in p.text.splitlines() if f"tupe: {command}: heartbeat: rank {rank} ({HOST}) sent none for"
             in line]
    check(len(lines) >= 1 and "while rank 0" in lines[0] and "TUPE_HEARTBEAT_TIMEOUT_S = 5" in lines[0],
          f"{name}: the line names rank {rank}, its host and rank 0's activity: {lines[0] if lines else ''}", p.text)
    nothing_left(name, unique)
    return p


def frozen_watchdog(name, np_, rank, args, unique):
    """A job whose waits are the watchdog's (args set dist.timeout_s 5): its line names the collective."""
    p = run_frozen(name, np_, rank, args)
    lines = [line for line in p.text.splitlines() if line.startswith("tupe: watchdog: rank 0: collective '")]
    check(len(lines) >= 1 and f"did not finish within {TIMEOUT_S} s (dist.timeout_s)" in lines[0],
          f"{name}: the watchdog names the collective rank 0 waited in: {lines[0] if lines else ''}", p.text)
    nothing_left(name, unique)
    return p


def tiny_pretrain(ck, steps, shards):
    return ["pretrain", "--config", os.path.join(SRC, "configs", "tiny.ini"), "--model.hidden_size", 32,
            "--model.num_layers", 2, "--model.num_heads", 4, "--model.ffn_size", 64, "--data.train_shards", shards,
            "--data.validation_shards", "", "--data.global_batch_size", 12, "--optimizer.warmup_steps", 2,
            "--optimizer.total_steps", steps, "--precision.precision", "fp32", "--checkpoint.dir", ck,
            "--checkpoint.every_steps", steps, "--train.micro_batch_size", 2, "--train.threads", 1,
            "--train.progress", "false", "--resume", "auto"]


def main():
    work = sys.argv[1]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    shards = os.path.join(work, "shards")
    pp = ["preprocess", "--config", os.path.join(SRC, "configs", "tiny.ini"), "--input",
          os.path.join(DATA, "text", "wikitext-2", "wiki.test.raw"), "--tokenizer.vocab", VOCAB, "--output", shards,
          "--preprocess.num_shards", 4, "--overwrite", "--quiet"]

    p = mpirun(3, pp, stall="rank=2,phase=work,seconds=12")
    check(p.returncode == 0 and "heartbeat" not in p.text,
          f"slow preprocess: rank 2 asleep 12 s (> the {TIMEOUT_S} s timeout) is waited for; the job ends 0", p.text)

    frozen("frozen preprocess", 3, 2, pp, shards, "preprocess")
    p = mpirun(1, pp)
    check(p.returncode == 0 and "took over the lock of tupe preprocess" in p.text,
          "the next preprocess into the folder takes the frozen run's lock over", p.text)
    check(not glob.glob(os.path.join(shards, "*.tmp-*")), "no temporary shard of the frozen run is left")

    frozen("frozen verify", 3, 1, ["verify", "--shards", shards], shards, "verify")

    encoder = os.path.join(work, "encoder")
    p = mpirun(1, tiny_pretrain(encoder, 4, shards))
    check(p.returncode == 0, "an encoder for fine-tuning", p.text)
    out = os.path.join(work, "glue_out")
    ft = ["finetune", "--finetune.checkpoint", encoder, "--tokenizer.vocab", VOCAB, "--finetune.tasks", "RTE",
          "--finetune.data_dir", GLUE, "--finetune.train_rows", 32, "--finetune.epochs", 1, "--finetune.batch_size",
          8, "--finetune.learning_rates", "1e-3", "--finetune.max_length", 32, "--finetune.threads", 1,
          "--finetune.output_dir", out, "--overwrite"]
    p = mpirun(1, ft)
    check(p.returncode == 0, "a fine-tuning to evaluate", p.text)
    ev = ["evaluate", "--model", os.path.join(out, "models", "RTE"), "--finetune.data_dir", GLUE,
          "--finetune.threads", 1]
    frozen("frozen evaluate", 2, 1, ev, out, "evaluate")

    frozen_pt = os.path.join(work, "frozen_pretrain")
    frozen_watchdog("frozen pretrain", 2, 1, tiny_pretrain(frozen_pt, 40, shards) + ["--dist.timeout_s", TIMEOUT_S],
                    frozen_pt)
    frozen_ft = os.path.join(work, "frozen_finetune")
    ft_frozen = [frozen_ft if a == out else a for a in ft] + ["--dist.timeout_s", TIMEOUT_S]
    frozen_watchdog("frozen finetune", 2, 1, ft_frozen, frozen_ft)


if __name__ == "__main__":
    main()
