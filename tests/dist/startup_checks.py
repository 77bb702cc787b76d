"""A bounded start-up (dist/startup.h): `tupe` jobs under mpirun in which one rank does not
arrive at a start-up wait. Each must end within the phase's limit + 10 s (+ the launcher's
teardown) with one line naming the phase, and the missing rank with its host.

Usage: startup_checks.py CHECK WORKDIR
  pretrain    3 ranks, rank 2 stalls on entering each start-up phase in turn (config check,
              placement, communicator, data check, resume: the checkpoint choice), limit 3 s
              (dist.startup_timeout_s): rank 0 names the phase and "rank 2 (HOST)"; rank 0
              stalling instead: the others name rank 0 after 3 + 10 s
  mpi_init    rank 2 sleeps before MPI_Init: the others end the job after
              TUPE_STARTUP_TIMEOUT_S = 3 s naming MPI start-up
  preprocess  2 ranks, rank 1 stalls in the options agreement (TUPE_STARTUP_TIMEOUT_S = 3):
              the job ends naming it and leaves no output folder; rank 1 late in the commit's
              counts (after the start-up) is no fault: that run succeeds
  finetune    2 ranks, rank 1 stalls in the config check (dist.startup_timeout_s = 3)
Environment: TUPE_BIN, TUPE_SOURCE_DIR, TUPE_SHARED_DATA.
"""
import os
import re
import shutil
import socket
import subprocess
import sys
import time

TUPE = os.environ["TUPE_BIN"]
SRC = os.environ["TUPE_SOURCE_DIR"]
DATA = os.environ.get("TUPE_SHARED_DATA", os.path.join(SRC, "..", "shared", "data"))
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_btl_vader_single_copy_mechanism="none", OMP_NUM_THREADS="1")
VOCAB = os.path.join(DATA, "vocab", "bert-base-uncased-vocab.txt")
LIMIT_S = 3
HOST = socket.gethostname()


def fail(message):
    sys.exit("FAILED: " + message)


def mpirun(np_, args, env_extra=None, timeout=240):
    cmd = ["mpirun", "-np", str(np_), "--oversubscribe", "--bind-to", "none", TUPE] + args
    t0 = time.time()
    p = subprocess.run(cmd, env=dict(ENV, **(env_extra or {})), capture_output=True, text=True, timeout=timeout)
    p.wall_s = time.time() - t0
    return p


def shards(work):
    out = os.path.join(work, "shards")
    if not os.path.isdir(out):
        p = mpirun(1, ["preprocess", "--config", os.path.join(SRC, "configs", "tiny.ini"), "--input",
                       os.path.join(DATA, "text", "wikitext-2", "wiki.test.raw"), "--tokenizer.vocab", VOCAB,
                       "--output", out, "--quiet"])
        if p.returncode != 0:
            fail(f"preprocess for the fixture: {p.stderr[-2000:]}")
    return out


def pretrain_args(work, ckpt, **overrides):
    opts = {"model.hidden_size": 32, "model.num_layers": 1, "model.num_heads": 2, "model.ffn_size": 64,
            "data.train_shards": shards(work), "data.validation_shards": "", "data.global_batch_size": 6,
            "train.micro_batch_size": 2, "train.max_steps": 2, "optimizer.total_steps": 2,
            "optimizer.warmup_steps": 1, "precision.precision": "fp32", "checkpoint.dir": ckpt,
            "train.threads": 1, "train.progress": "false", "dist.timeout_s": 120,
            "dist.startup_timeout_s": LIMIT_S}
    opts.update(overrides)
    args = ["pretrain", "--config", os.path.join(SRC, "configs", "tiny.ini")]
    for k, v in opts.items():
        args += [f"--{k}", str(v)]
    return args


def stall(rank, phase):
    return {"TUPE_TEST_STALL": f"rank={rank},phase={phase},seconds=300"}


def expect_ended(p, what, want, limit_s):
    """The job failed within limit_s and its output holds the regular expression `want`."""
    text = p.stdout + p.stderr
    line = next((l for l in text.splitlines() if re.search(want, l)), None)
    print(f"{what}: exit {p.returncode} after {p.wall_s:.1f} s: {line}")
    if p.returncode == 0:
        fail(f"{what}: the job succeeded:\n{text[-3000:]}")
    if line is None:
        fail(f"{what}: no line matches {want!r}:\n{text[-3000:]}")
    if p.wall_s > limit_s:
        fail(f"{what}: the job took {p.wall_s:.1f} s to end (limit {limit_s} s)")


def check_pretrain(work):
    host = re.escape(HOST)
    for phase in ("config check", "placement", "communicator", "data check", "resume: the checkpoint choice"):
        ck = os.path.join(work, "ck-" + phase.replace(" ", "_").replace(":", ""))
        shutil.rmtree(ck, ignore_errors=True)
        p = mpirun(3, pretrain_args(work, ck) + ["--resume", "auto"], stall(2, phase))
        want = (rf"start-up: phase '{re.escape(phase)}' did not finish within {LIMIT_S} s: "
                rf"rank 2 \({host}\) did not arrive; ending the job")
        # rank 0's deadline, MPI_Abort and mpirun's teardown of the sleeping rank
        expect_ended(p, f"rank 2 stalled in {phase}", want, LIMIT_S + 25)
    # Rank 0 is the one missing: the others wait the 10 s grace longer, then name it.
    ck = os.path.join(work, "ck-rank0")
    p = mpirun(3, pretrain_args(work, ck) + ["--resume", "none"], stall(0, "data check"))
    want = (rf"start-up: rank [12]: phase 'data check' did not finish within {LIMIT_S + 10} s, and rank 0, which names the "
            rf"missing ranks, did not end the job: rank 0 \({host}\) is missing or late")
    expect_ended(p, "rank 0 stalled in data check", want, LIMIT_S + 10 + 25)
    # Without a stall the same job runs (the bound costs a healthy start nothing).
    ck = os.path.join(work, "ck-healthy")
    shutil.rmtree(ck, ignore_errors=True)
    p = mpirun(3, pretrain_args(work, ck) + ["--resume", "none"])
    if p.returncode != 0 or "pre-training finished at step 2" not in p.stdout + p.stderr:
        fail(f"the healthy 3-rank run failed:\n{(p.stdout + p.stderr)[-3000:]}")
    print("pretrain OK")


def check_mpi_init(work):
    ck = os.path.join(work, "ck-init")
    p = mpirun(3, pretrain_args(work, ck) + ["--resume", "none"],
               dict(stall(2, "MPI start-up"), TUPE_STARTUP_TIMEOUT_S=str(LIMIT_S)))
    want = (rf"start-up: rank [01]: MPI start-up \(MPI_Init, the node split and the host names\) did not finish within {LIMIT_S} s: "
            rf"a rank or node of the job did not join")
    expect_ended(p, "rank 2 stalled before MPI_Init", want, LIMIT_S + 25)
    print("mpi_init OK")


def check_preprocess(work):
    out = os.path.join(work, "pp-out")
    shutil.rmtree(out, ignore_errors=True)
    args = ["preprocess", "--config", os.path.join(SRC, "configs", "tiny.ini"), "--input",
            os.path.join(DATA, "text", "wikitext-2", "wiki.test.raw"), "--tokenizer.vocab", VOCAB, "--output", out,
            "--quiet"]
    p = mpirun(2, args, dict(stall(1, "options and inputs"), TUPE_STARTUP_TIMEOUT_S=str(LIMIT_S)))
    want = (rf"start-up: phase 'options and inputs' did not finish within {LIMIT_S} s: rank 1 \({re.escape(HOST)}\) "
            rf"did not arrive")
    expect_ended(p, "preprocess, rank 1 stalled", want, LIMIT_S + 25)
    if os.path.exists(out):
        fail(f"the failed preprocess left {out}: {os.listdir(out)}")
    # The commit's waits come after the start-up (begin_work): rank 1 entering the counts 5 s
    # late is no start-up fault (the hook only acts inside a start-up phase, which the counts
    # of a run past begin_work are not), so the run succeeds with the 3 s limit.
    p = mpirun(2, args, {"TUPE_STARTUP_TIMEOUT_S": str(LIMIT_S),
                         "TUPE_TEST_STALL": "rank=1,phase=counts,seconds=5"})
    if p.returncode != 0 or not os.path.isdir(out):
        fail(f"preprocess with rank 1 late in the commit failed:\n{p.stderr[-3000:]}")
    print("preprocess OK")


def check_finetune(work):
    out = os.path.join(work, "ft-out")
    shutil.rmtree(out, ignore_errors=True)
    args = ["finetune", "--finetune.checkpoint", os.path.join(work, "no-checkpoint-needed-before-the-check"),
            "--finetune.tasks", "RTE", "--finetune.data_dir", os.path.join(DATA, "glue"), "--finetune.output_dir",
            out, "--tokenizer.vocab", VOCAB, "--dist.startup_timeout_s", str(LIMIT_S)]
    p = mpirun(2, args, stall(1, "config check"))
    want = rf"start-up: phase 'config check' did not finish within {LIMIT_S} s: rank 1 \({re.escape(HOST)}\) did not"
    expect_ended(p, "finetune, rank 1 stalled", want, LIMIT_S + 25)
    print("finetune OK")


def main():
    check, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    {"pretrain": check_pretrain, "mpi_init": check_mpi_init, "preprocess": check_preprocess,
     "finetune": check_finetune}[check](work)


if __name__ == "__main__":
    main()
