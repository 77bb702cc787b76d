"""One job per output folder (common/folder_lock.h, docs/clusters.md "One job per folder"),
end to end for the three jobs that write a folder: pre-training's checkpoint.dir, preprocess's
--output and fine-tuning's finetune.output_dir.

Usage: folder_lock_checks.py JOB WORKDIR      (JOB: pretrain | preprocess | finetune)
For each job:
  concurrent  job A starts; once its lock file exists A is stopped (SIGSTOP: a slow job, its
              heartbeat fresh) and job B, the same command into the same folder (with --overwrite
              or --resume auto, so only the lock can refuse it), exits 1 within 60 s with one line
              "... is in use by tupe <job>, pid <A's pid> on <host>"; A, continued, ends 0 with its
              outputs whole (pretrain: its last checkpoint and one "start" record in the metrics;
              preprocess: the shards equal a lone run's bytes; finetune: results.json) and no
              warning line; the lock file is gone after it
  stale       job A is SIGKILLed while it holds the lock (pretrain: after its first checkpoint);
              job B takes the lock over with a notice naming A's pid and "its process is gone", and
              ends 0 (pretrain: --resume auto from A's checkpoint to the last step; preprocess: A's
              temporary shards removed)
WORKDIR/../shards: the WikiText-2 shards of pretrain_checks.py shards.
Environment: TUPE_BIN, TUPE_SOURCE_DIR, TUPE_SHARED_DATA.
"""
import glob
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

from pretrain_common import DATA, ENV, SRC, TUPE, pretrain_args

VOCAB = os.path.join(DATA, "vocab", "bert-base-uncased-vocab.txt")
LOCK = ".tupe-lock"


def check(cond, what, detail=""):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        sys.exit("FAILED: " + what + ("\n" + detail[-4000:] if detail else ""))


def start(args, env=None):
    return subprocess.Popen([TUPE] + args, env=env or ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)


def run(args, timeout=600):
    p = subprocess.run([TUPE] + args, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=timeout)
    return p.returncode, p.stdout


def wait_for(pred, what, proc, timeout=300):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if pred():
            return
        if proc.poll() is not None:
            check(False, f"{what}: the job ended first (exit {proc.returncode})", proc.stdout.read())
        time.sleep(0.05)
    check(False, f"{what}: not within {timeout} s")


def lock_holder(folder):
    try:
        return json.load(open(os.path.join(folder, LOCK)))
    except (OSError, ValueError):
        return None


def warnings(text):
    return [line for line in text.splitlines() if "warning" in line.lower()]


def sha_tree(folder, pattern):
    return {os.path.basename(f): hashlib.sha256(open(f, "rb").read()).hexdigest()
            for f in sorted(glob.glob(os.path.join(folder, pattern)))}


class Job:
    """The command of one kind of job, the folder it locks, and what 'whole' means for it."""

    def __init__(self, kind, work):
        self.kind, self.work = kind, work
        if kind == "pretrain":
            self.folder = os.path.join(work, "ckpt")
            self.args = pretrain_args(work, self.folder, **{"optimizer.total_steps": 40}) + ["--resume", "auto"]
        elif kind == "preprocess":
            self.folder = os.path.join(work, "shards")
            self.args = ["preprocess", "--config", os.path.join(SRC, "configs", "tiny.ini"), "--input",
                         os.path.join(DATA, "text", "wikitext-2", "wiki.test.raw"), "--tokenizer.vocab", VOCAB,
                         "--output", self.folder, "--overwrite", "--quiet"]
        else:
            ckpt = os.path.join(work, "encoder")
            if not os.path.isdir(ckpt):
                code, out = run(pretrain_args(work, ckpt, **{"optimizer.total_steps": 10}))
                check(code == 0, "the encoder for fine-tuning", out)
            self.folder = os.path.join(work, "glue_out")
            self.args = ["finetune", "--finetune.checkpoint", ckpt, "--tokenizer.vocab", VOCAB, "--finetune.tasks",
                         "RTE", "--finetune.data_dir", os.path.join(DATA, "glue"), "--finetune.train_rows", "64",
                         "--finetune.epochs", "2", "--finetune.batch_size", "16", "--finetune.learning_rates", "1e-3",
                         "--finetune.max_length", "32", "--finetune.threads", "1", "--finetune.output_dir",
                         self.folder, "--overwrite"]

    def ready_to_kill(self):
        """When A is far enough to be killed for the stale check."""
        if self.kind == "pretrain":
            return os.path.isdir(os.path.join(self.folder, "step_00000010"))
        if self.kind == "preprocess":  # held where its work begins (stale_env): the lock is taken by then
            return os.path.exists(self.stall_marker) and lock_holder(self.folder) is not None
        return lock_holder(self.folder) is not None

    @property
    def stall_marker(self):
        return os.path.join(self.work, "preprocess-stalled")

    def stale_env(self):
        """A preprocess of this size ends in a fraction of a second, faster than a poll can catch
        it mid-way: for the stale check it sleeps where its work begins (dist/stall_injection.h)
        and says so with a marker file, so that it is killed holding its lock."""
        if self.kind != "preprocess":
            return None
        if os.path.exists(self.stall_marker):
            os.remove(self.stall_marker)
        return dict(ENV, TUPE_TEST_STALL=f"rank=0,phase=work,seconds=60,marker={self.stall_marker}")

    def whole(self, out, starts_wanted=1):
        if self.kind == "pretrain":
            state = json.load(open(os.path.join(self.folder, "step_00000040", "trainer_state.json")))
            starts = [json.loads(line) for f in glob.glob(os.path.join(self.folder, "metrics", "*.jsonl"))
                      for line in open(f) if '"start"' in line]
            return state["step"] == 40 and len([s for s in starts if s.get("event") == "start"]) == starts_wanted
        if self.kind == "preprocess":
            return bool(sha_tree(self.folder, "*.h5")) and not glob.glob(os.path.join(self.folder, "*.tmp-*"))
        return os.path.isfile(os.path.join(self.folder, "results.json"))


def check_concurrent(kind, work):
    job = Job(kind, work)
    shutil.rmtree(job.folder, ignore_errors=True)
    a = start(job.args)
    wait_for(lambda: lock_holder(job.folder) is not None, "A's lock file", a)
    holder = lock_holder(job.folder)
    os.killpg(a.pid, signal.SIGSTOP)
    try:
        t0 = time.time()
        code, out = run(job.args, timeout=60)
        took = time.time() - t0
    finally:
        os.killpg(a.pid, signal.SIGCONT)
    lines = [line for line in out.splitlines() if "is in use by" in line]
    check(code == 1 and len(lines) == 1, f"{kind}: a second job into the same folder exits 1 with one line", out)
    check(f"is in use by tupe {kind}, pid {holder['pid']} on {holder['host']}" in lines[0],
          f"{kind}: the line names A's command, pid and host: {lines[0]}")
    check(took < 60, f"{kind}: refused in {took:.1f} s")
    a_out, _ = a.communicate(timeout=900)
    check(a.returncode == 0, f"{kind}: A, continued, ends 0", a_out)
    check(not warnings(a_out), f"{kind}: A printed no warning", a_out)
    check(job.whole(a_out), f"{kind}: A's outputs are whole and its own", a_out)
    check(not os.path.exists(os.path.join(job.folder, LOCK)), f"{kind}: A's lock file is gone after it")
    if kind == "preprocess":  # byte-identical to a lone run's shards
        first = sha_tree(job.folder, "*.h5")
        code, out = run(job.args)
        check(code == 0 and sha_tree(job.folder, "*.h5") == first, "preprocess: A's shards equal a lone run's", out)


def check_stale(kind, work):
    job = Job(kind, work)
    shutil.rmtree(job.folder, ignore_errors=True)
    a = start(job.args, job.stale_env())
    wait_for(job.ready_to_kill, "A at the point to kill it", a)
    holder = lock_holder(job.folder)
    os.killpg(a.pid, signal.SIGKILL)
    a.communicate()
    check(holder is not None and os.path.exists(os.path.join(job.folder, LOCK)),
          f"{kind}: a SIGKILLed job leaves its lock file")
    code, out = run(job.args)
    check(code == 0, f"{kind}: B ends 0 over the stale lock", out)
    notice = [line for line in out.splitlines() if "took over the lock of" in line]
    check(len(notice) == 1 and f"pid {holder['pid']}" in notice[0] and "its process is gone" in notice[0],
          f"{kind}: one notice names A's pid and why: {notice[0] if notice else out[-2000:]}")
    check(job.whole(out, starts_wanted=2), f"{kind}: B's outputs are whole", out)
    if kind == "pretrain":
        check(re.search(r"resumed from .*step_000000[1-3]0", out) is not None, "pretrain: B resumed A's checkpoint", out)


def main():
    kind, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    check_concurrent(kind, work)
    check_stale(kind, work)


if __name__ == "__main__":
    main()
