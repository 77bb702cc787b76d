"""Fault checks of `tupe pretrain` under mpirun (run through pretrain_checks.py CHECK WORKDIR):
a checkpoint write killed midway and damaged checkpoint files (crash), SIGUSR1 mid-run (signal),
SIGTERM during setup (signal_setup), a stalled rank (watchdog)."""
import json
import os
import shutil
import signal
import subprocess
import sys
import time

from pretrain_common import DATA, ENV, SRC, TUPE, error_lines, mpirun, pretrain_args


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
    if p.returncode == 0 or "ck: cannot create the folder: Not a directory" not in p.stderr or trained:
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
