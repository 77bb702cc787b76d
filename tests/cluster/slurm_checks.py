"""launch/tupe.sbatch under a real Slurm (slurmctld, one slurmd per simulated node, munged)
on the simulated cluster, with both launchers.

Usage: slurm_checks.py CHECK WORKDIR
  launchers   `sbatch launch/tupe.sbatch` with TUPE_LAUNCHER=srun (srun --mpi=pmix), then
              TUPE_LAUNCHER=mpirun, 2 nodes x 2 ranks, each pre-empted by `scontrol requeue`
              mid-run: SIGTERM -> checkpoint -> the requeued job resumes from it and completes;
              2 ranks per node; final weights equal an uninterrupted 2 x 2 run's in the cluster. Under
              mpirun, mpirun and Open MPI's daemons run with SIGTERM blocked, the ranks do not
  time_limit  --time=1 --signal=B:USR1@40: checkpoint, requeue, auto-resume, twice, then
              cancelled in the queue; the newest checkpoint equals an uninterrupted run of as
              many steps (TUPE_TIME_LIMIT_LAUNCHER srun or mpirun)
  node_down   node node2 killed (slurmd and ranks): the job ends, with the reason in its output
  requeue_lock  a 1-node job under --requeue loses its node; the re-queued attempt on the other
              node takes the first attempt's folder lock over at once (an earlier attempt of the
              same job), resumes and completes
  two_phase   launch/two_phase.py --launcher slurm with the toy presets, 2 nodes x 1 rank: phase 2
              is held by Slurm (Dependency=afterok on phase 1) while phase 1 runs, starts after it
              completed, from its last checkpoint (trainer_state origin: phase 1's step 60 and
              the SHA-256 of its weights), and completes
A requeued job is held by Slurm for about 2 minutes (its BeginTime); the checks release it
at once with `scontrol update JobId=J StartTime=now`, as an administrator could.
Environment: TUPE_BIN, TUPE_SOURCE_DIR, TUPE_SHARED_DATA.
"""
import os
import re
import shutil
import signal
import sys
import time

from cluster_lib import (DATA, SRC, TUPE, Cluster, fail, max_rel_diff, pretrain_args, require_namespaces,
                         state, wait_for, weights, whole_checkpoints)

SBATCH = os.path.join(SRC, "launch", "tupe.sbatch")


def shards_of(work):
    return os.path.join(os.path.dirname(work), "preprocess", "shards")


def job_info(c, job):
    """`scontrol show job` as a dict ({} once Slurm forgot the job)."""
    p = c.run("head", ["scontrol", "show", "job", "-o", job], check=False)
    if p.returncode != 0:
        return {}
    return dict(kv.split("=", 1) for kv in p.stdout.split() if "=" in kv)


def submit(c, work, name, launcher, args, sbatch=(), env_vars=(), nodes=2):
    """sbatch launch/tupe.sbatch from the checkout (its submit folder) on `nodes` nodes x 2
    ranks; env_vars ("NAME=VALUE", ...) reach the script (sbatch exports the environment)."""
    out = os.path.join(work, f"{name}-{time.time_ns()}-%j.out")  # job ids start at 1 in every cluster
    env = ["env", f"TUPE_BIN={TUPE}", f"TUPE_LAUNCHER={launcher}", "TUPE_GPUS_PER_NODE=0",
           f"TUPE_CONFIG={os.path.join(SRC, 'configs', 'tiny.ini')}", *env_vars]
    cmd = env + ["sbatch", "--parsable", f"--nodes={nodes}", "--ntasks-per-node=2", "--cpus-per-task=1", "--gpus-per-node=0",
                 f"--output={out}", *sbatch, SBATCH] + args[3:]  # tupe.sbatch adds pretrain --config
    cwd = os.getcwd()
    os.chdir(SRC)
    try:
        job = c.run("head", cmd).stdout.strip().split(";")[0]
    finally:
        os.chdir(cwd)
    return job, out.replace("%j", job)


def release_if_held(c, job):
    """A requeued job waits for its BeginTime; start it now."""
    info = job_info(c, job)
    if info.get("JobState") != "PENDING" or info.get("Reason") != "BeginTime":
        return False
    # Only once the previous run has left every node: released while a node still completes
    # it, SLURM starts the job there again and kills it ("Job credential revoked").
    nodes = c.run("head", ["sinfo", "-h", "-N", "-o", "%T"], check=False).stdout.split()
    if not nodes or any(n != "idle" for n in nodes):
        return False
    time.sleep(2)
    c.run("head", ["scontrol", "update", f"JobId={job}", "StartTime=now"])
    return True


def wait_done(c, job, timeout, out_path):
    """Waits until the job left the queue (releasing requeued holds); its last state."""
    t0, last = time.time(), {}
    while time.time() - t0 < timeout:
        info = job_info(c, job)
        if info:
            last = info
        if not info or info.get("JobState") in ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL",
                                                 "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE", "PREEMPTED"):
            return last
        release_if_held(c, job)
        time.sleep(1)
    text = open(out_path).read() if os.path.exists(out_path) else "(no output)"
    fail(f"job {job} not done after {timeout} s: {last.get('JobState')} {last.get('Reason')}\n{text[-3000:]}")


def reference(c, work, shards, steps, **overrides):
    """An uninterrupted run of `steps` steps on the same 2 nodes x 2 ranks as the jobs, under
    mpirun in the cluster while its nodes are idle (outside it, 4 oversubscribed ranks of one
    host trained 4x slower than a job in it under a build: 544 steps took 272 s); its folder."""
    ref = os.path.join(work, f"uninterrupted_2x2_{steps}")
    shutil.rmtree(ref, ignore_errors=True)
    t0 = time.time()
    opts = {"train.max_steps": steps, "checkpoint.every_steps": 0, **overrides}
    c.run(*c.mpirun({"node1": 2, "node2": 2}, pretrain_args(shards, ref, **opts) + ["--resume", "none"]))
    print(f"the uninterrupted 2 x 2 run of {steps} steps in the cluster: {time.time() - t0:.0f} s")
    return ref


def compare(ckpt, ref, steps, what):
    d = max_rel_diff(weights(ckpt, steps), weights(ref, steps))
    pos = (state(ckpt, steps)["data_position"], state(ref, steps)["data_position"])
    print(f"{what}: final weights (step {steps}) vs the uninterrupted run {os.path.basename(ref)}: "
          f"max relative difference {d:.3e}")
    if d > 1e-6 or pos[0] != pos[1]:
        fail(f"{what}: differs from the uninterrupted run ({d:.3e} > 1e-6, or data position {pos})")


def requeue_cycles(c, job, out, ck, steps, timeout):
    info = wait_done(c, job, timeout, out)
    text = open(out).read()
    if info.get("JobState") != "COMPLETED" or f"pre-training finished at step {steps}" not in text:
        fail(f"job {job} {info.get('JobState')} ({info.get('Reason')}):\n{text[-4000:]}")
    return int(info.get("Restarts", "0")), text


def term_blocked(c):
    """{pid: (command name, SIGTERM blocked?)} of the cluster's mpirun, orted and tupe processes
    (from /proc/PID/status SigBlk, seen from outside the cluster)."""
    pidns = open(os.path.join(c.dir, "pidns")).read().strip()
    found = {}
    for p in os.listdir("/proc"):
        try:
            if not p.isdigit() or os.readlink(f"/proc/{p}/ns/pid") != pidns:
                continue
            status = dict(line.split(":", 1) for line in open(f"/proc/{p}/status").read().splitlines() if ":" in line)
        except OSError:
            continue
        name = status["Name"].strip()
        if name in ("mpirun", "orted", "tupe"):
            found[p] = (name, bool(int(status["SigBlk"], 16) & (1 << (signal.SIGTERM - 1))))
    return found


def check_launchers(work):
    """Both launchers (TUPE_LAUNCHER srun, then mpirun) on one Slurm cluster, 2 nodes x 2 ranks,
    each pre-empted by `scontrol requeue` after its first steps: SLURM sends SIGTERM to every
    process of the job; every rank checkpoints at the step it reached, the launcher ends
    normally (the script's stop line, no failed attempt), the requeued job resumes from exactly
    that checkpoint and completes. Each job's placement line shows 2 ranks per node and its
    final weights equal one uninterrupted run's on the same 2 nodes x 2 ranks (mpirun). Under mpirun, mpirun and the daemons
    run with SIGTERM blocked and the ranks without."""
    require_namespaces()
    shards = shards_of(work)
    steps = 120
    with Cluster(work, "sim", 2, slurm=True) as c:
        done = [preempt_launcher(c, work, shards, launcher, steps) for launcher in ("srun", "mpirun")]
        ref = reference(c, work, shards, steps)
    for launcher, ck in done:
        compare(ck, ref, steps, f"preempted and requeued ({launcher})")
    print("launchers OK")


def preempt_launcher(c, work, shards, launcher, steps):
    """One launcher's job pre-empted and requeued (check_launchers); its checkpoint folder."""
    ck = os.path.join(work, f"preempted_{launcher}")
    shutil.rmtree(ck, ignore_errors=True)
    t0 = time.time()
    job, out = submit(c, work, f"preempt_{launcher}", launcher,
                      pretrain_args(shards, ck, **{"train.max_steps": steps, "checkpoint.every_steps": 50}))
    wait_for(lambda: os.path.exists(os.path.join(ck, "metrics", "rank_0.jsonl")), 120, "the first step")
    time.sleep(2)
    if launcher == "mpirun":
        procs = term_blocked(c)
        names = sorted(name for name, _ in procs.values())
        print(f"SIGTERM blocked: {sorted(f'{n} {b}' for n, b in procs.values())}")
        if names.count("tupe") != 4 or "mpirun" not in names or "orted" not in names:
            fail(f"expected mpirun, orted and 4 ranks in the cluster, found {names}")
        wrong = [f"{n} (pid {p})" for p, (n, b) in procs.items() if b != (n != "tupe")]
        if wrong:
            fail(f"SIGTERM should be blocked in mpirun and orted and not in the ranks: wrong in {wrong}")
    c.run("head", ["scontrol", "requeue", job])
    print(f"{launcher}: scontrol requeue {job}")
    restarts, text = requeue_cycles(c, job, out, ck, steps, 400)
    lines = text.splitlines()
    shown = [line for line in lines if "stopped by signal" in line or "resumed from" in line or
             line.startswith("tupe.sbatch: job") and "(restart" not in line or "tupe-mpirun: SIGTERM" in line]
    print("\n".join(shown))
    if "placement: node1 ranks 0-1; node2 ranks 2-3" not in text:
        fail(f"{launcher}: not 2 ranks per node:\n{text[-3000:]}")
    stop = [line for line in lines if line.startswith("pre-training stopped by signal at step ")]
    if restarts < 1 or len(stop) != 1:
        fail(f"{launcher}: no checkpoint on SIGTERM (restarts {restarts}):\n{text[-4000:]}")
    at = int(re.match(r"pre-training stopped by signal at step (\d+)", stop[0]).group(1))
    if not any(re.match(rf"resumed from \S+/step_{at:08d} at step {at} ", line) for line in lines):
        fail(f"{launcher}: the requeued job did not resume from the SIGTERM checkpoint at step {at}:\n"
             f"{text[-4000:]}")
    if not any(line.startswith(f"tupe.sbatch: job {job} stopped at a checkpoint on SIGTERM") for line in lines):
        fail(f"{launcher}: tupe.sbatch did not see the launcher stop at a checkpoint on SIGTERM:\n{text[-4000:]}")
    failed = [line for line in lines if line.startswith("tupe.sbatch:") and "ended with exit" in line]
    if failed:
        fail(f"{launcher}: an attempt failed: {failed[0]}")
    print(f"{launcher}: job {job} pre-empted, requeued and completed in {time.time() - t0:.1f} s")
    return launcher, ck


def check_time_limit(work):
    """--time=1 --signal=B:USR1@40: Slurm signals the script before the limit, tupe stops at a
    checkpoint, the script re-queues the job, the next attempt resumes from it. The run is
    longer than any number of attempts (train.max_steps 10^6), so nothing here depends on the
    machine's speed or load: the check waits for two attempts that each stopped by the signal
    (the second resumed from the first's checkpoint), cancels the job while its third attempt
    waits in the queue, and compares the newest checkpoint, at whatever step S it holds, with
    an uninterrupted run of S steps on the same 2 nodes x 2 ranks (the same schedule:
    optimizer.total_steps 10^6), made under mpirun in the cluster once the job is cancelled.
    (An earlier form sized a run to last 75 s from a timed reference; a load change between
    the two made it fail.)"""
    require_namespaces()
    shards = shards_of(work)
    launcher = os.environ.get("TUPE_TIME_LIMIT_LAUNCHER", "srun")
    ck = os.path.join(work, "time_limited")
    shutil.rmtree(ck, ignore_errors=True)
    long_run = {"train.max_steps": 10 ** 6, "optimizer.total_steps": 10 ** 6, "checkpoint.every_steps": 0,
                "train.log_every": 50}
    t0 = time.time()
    with Cluster(work, "sim", 2, slurm=True) as c:
        job, out = submit(c, work, "time_limit", launcher, pretrain_args(shards, ck, **long_run),
                          sbatch=["--time=1", "--signal=B:USR1@40"])
        text = ""
        while True:
            text = open(out).read() if os.path.exists(out) else ""
            stops = text.count("pre-training stopped by signal")
            info = job_info(c, job)
            if stops >= 2 and (not info or info.get("JobState") == "PENDING"):
                break
            if info and info.get("JobState") not in ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "REQUEUED"):
                fail(f"job {job} {info.get('JobState')} ({info.get('Reason')}):\n{text[-4000:]}")
            if time.time() - t0 > 500:
                fail(f"job {job}: no two stops by the signal after {time.time() - t0:.0f} s:\n{text[-4000:]}")
            if stops < 2:
                release_if_held(c, job)  # the second attempt starts now, not after the 2-minute hold
            time.sleep(1)
        c.run("head", ["scancel", job])
        restarts = int(job_info(c, job).get("Restarts", "0") or 0)
        cycles = [line for line in text.splitlines() if "stopped by signal" in line or "resumed from" in line
                  or "re-queueing" in line]
        print("\n".join(cycles))
        stopped = [int(m) for m in re.findall(r"pre-training stopped by signal at step (\d+)", text)]
        resumed = [int(m) for m in re.findall(r"resumed from \S+ at step (\d+)", text)]
        print(f"time limit ({launcher}): stops at steps {stopped}, resumed at {resumed}, {restarts} requeue(s), "
              f"{time.time() - t0:.0f} s")
        if len(stopped) < 2 or resumed[:1] != stopped[:1] or stopped[1] < stopped[0]:
            fail(f"the time limit did not cycle through checkpoint, requeue and resume:\n{text[-4000:]}")
        steps = whole_checkpoints(ck)[-1]
        if steps != stopped[-1] or steps < 1:
            fail(f"the newest checkpoint is step {steps}, the last stop was at step {stopped[-1]}")
        ref = reference(c, work, shards, steps, **{**long_run, "train.max_steps": steps, "train.log_every": 100})
    compare(ck, ref, steps, "time-limited cycles")
    print("time_limit OK")


def check_node_down(work):
    require_namespaces()
    shards = shards_of(work)
    for launcher in ("srun", "mpirun"):
        ck = os.path.join(work, f"down_{launcher}")
        shutil.rmtree(ck, ignore_errors=True)
        with Cluster(work, "sim", 2, slurm=True) as c:
            # (mpirun: tupe-mpirun's grace for an mpirun that lost node2's daemon, 2 s)
            job, out = submit(c, work, f"down_{launcher}", launcher,
                              pretrain_args(shards, ck, **{"train.max_steps": 100000}), sbatch=["--no-requeue"],
                              env_vars=["TUPE_MPIRUN_ABORT_GRACE_S=2"])
            wait_for(lambda: len(whole_checkpoints(ck)) >= 1, 120, "the first checkpoint")
            t0 = time.time()
            c.fault("kill", "node2")
            info = wait_done(c, job, 120, out)
            text = open(out).read()
            tail = [line for line in text.splitlines() if line.startswith("tupe.sbatch:")][-1:]
            print(f"{launcher}: job {job} {info.get('JobState')} ({info.get('Reason')}) {time.time() - t0:.1f} s "
                  f"after the kill; {tail}")
            if info.get("JobState") == "COMPLETED" or not tail or "node2" not in tail[0] or "ranks 2-3" not in tail[0]:
                fail(f"{launcher}: the job output does not end with the reason naming node2:\n{text[-3000:]}")
    print("node_down OK")


def check_requeue_lock(work):
    """The folder lock of a job re-queued after a node failure: a 1-node job (2 ranks) under
    --requeue loses its node (slurmd and ranks killed) after its first checkpoint; Slurm
    re-queues it and it starts on the other node at once. Its checkpoint folder still holds the
    first attempt's lock record (another host, a heartbeat seconds old), which would refuse any
    other job for TUPE_LOCK_STALE_S; the second attempt takes it over as an earlier attempt of
    the same job, says so, resumes from the checkpoint and completes."""
    require_namespaces()
    shards = shards_of(work)
    steps = 300  # long enough that the node dies mid-run, whatever the load
    ck = os.path.join(work, "requeue_lock")
    shutil.rmtree(ck, ignore_errors=True)
    with Cluster(work, "sim", 2, slurm=True) as c:
        job, out = submit(c, work, "requeue_lock", "srun", pretrain_args(shards, ck, **{"train.max_steps": steps}),
                          sbatch=["--requeue"], nodes=1)
        wait_for(lambda: len(whole_checkpoints(ck)) >= 1, 120, "the first checkpoint")
        host = job_info(c, job).get("BatchHost", "")
        if host not in ("node1", "node2"):
            fail(f"job {job} runs on {host!r}, not one node of the cluster")
        other = "node2" if host == "node1" else "node1"
        record = open(os.path.join(ck, ".tupe-lock")).read()
        c.fault("kill", host)
        t0, released, info = time.time(), False, {}
        while time.time() - t0 < 240:
            info = job_info(c, job)
            if info.get("JobState") in ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL"):
                break
            if not released and info.get("JobState") == "PENDING" and info.get("Reason") == "BeginTime":
                state_of = c.run("head", ["sinfo", "-h", "-n", other, "-o", "%T"], check=False).stdout.strip()
                if state_of == "idle":
                    c.run("head", ["scontrol", "update", f"JobId={job}", "StartTime=now"])
                    released = time.time()
            time.sleep(1)
        text = open(out).read() if os.path.exists(out) else ""
        took = [line for line in text.splitlines() if "took over the lock of" in line]
        print(f"job {job}: first attempt on {host} (lock record {record.strip()[:160]}...); after the kill: "
              f"{info.get('JobState')}, restarts {info.get('Restarts')}, on {info.get('BatchHost')}; {took}")
        if not (info.get("JobState") == "COMPLETED" and info.get("BatchHost") == other and
                int(info.get("Restarts", "0")) >= 1 and f"pre-training finished at step {steps}" in text and
                len(took) == 1 and f"an earlier attempt of the re-queued job {job}" in took[0] and host in took[0]):
            fail(f"the re-queued job did not take its lock over and finish:\n{text[-4000:]}")
        if released and time.time() - released > 200:
            fail("the re-queued job took longer than the lock's stale bound: it waited for the lock")
    print("requeue_lock OK")


def check_two_phase(work):
    """The two-phase chain as two dependent Slurm jobs (launch/two_phase.py --launcher slurm)."""
    import hashlib
    import json
    require_namespaces()
    shutil.rmtree(os.path.join(work, "chain"), ignore_errors=True)
    chain = os.path.join(work, "chain")
    presets = [os.path.join(SRC, "configs", "two-phase", f"toy-phase{n}.ini") for n in (1, 2)]
    data = DATA
    corpus = os.path.join(data, "text", "wikitext-2", "wiki.test.raw")
    vocab = os.path.join(data, "vocab", "bert-base-uncased-vocab.txt")
    for n, preset in enumerate(presets, 1):  # the shards, made here (the chain's --corpus does it on the login node)
        subprocess_run([TUPE, "preprocess", "--config", preset, "--input", corpus, "--tokenizer.vocab", vocab,
                        "--output", os.path.join(chain, f"shards-{n}"), "--overwrite", "--quiet"])
    out = os.path.join(work, f"two-phase-{time.time_ns()}-%j.out")
    with Cluster(work, "sim", 2, slurm=True) as c:
        cmd = ["env", f"TUPE_BIN={TUPE}", "TUPE_LAUNCHER=srun", "TUPE_GPUS_PER_NODE=0", sys.executable,
               os.path.join(SRC, "launch", "two_phase.py"), "--phase1", presets[0], "--phase2", presets[1],
               "--work", chain, "--vocab", vocab, "--launcher", "slurm", "--sbatch=--nodes=2", "--sbatch=--ntasks-per-node=1",
               "--sbatch=--cpus-per-task=1", "--sbatch=--gpus-per-node=0", f"--sbatch=--output={out}"]
        text = c.run("head", cmd).stdout
        ids = [line.split(" is job ")[1].split()[0] for line in text.splitlines() if " is job " in line]
        if len(ids) != 2:
            fail(f"two_phase.py --launcher slurm printed no two job ids:\n{text}")
        second = job_info(c, ids[1])
        print(f"phase 1 = job {ids[0]}, phase 2 = job {ids[1]}: {second.get('JobState')} ({second.get('Reason')}), "
              f"Dependency={second.get('Dependency')}")
        if f"afterok:{ids[0]}" not in second.get("Dependency", "") or second.get("JobState") != "PENDING":
            fail(f"phase 2 is not held on phase 1: {second}")
        first = wait_done(c, ids[0], 600, out.replace("%j", ids[0]))
        last = wait_done(c, ids[1], 600, out.replace("%j", ids[1]))
    logs = [open(out.replace("%j", j)).read() for j in ids]
    if first.get("JobState") != "COMPLETED" or last.get("JobState") != "COMPLETED":
        fail(f"jobs {first.get('JobState')}, {last.get('JobState')}:\n{logs[0][-2000:]}\n{logs[1][-2000:]}")
    step60 = os.path.join(chain, "phase1", "step_00000060")
    if "pre-training finished at step 60" not in logs[0] or f"initialising from {step60}" not in logs[1] \
            or "pre-training finished at step 20" not in logs[1]:
        fail(f"the phases' outputs:\n{logs[0][-1500:]}\n{logs[1][-1500:]}")
    origin = json.load(open(os.path.join(chain, "phase2", "step_00000020", "trainer_state.json")))["origin"]
    sha = hashlib.sha256(open(os.path.join(step60, "model.safetensors"), "rb").read()).hexdigest()
    if origin["path"] != step60 or origin["weights_sha256"] != sha:
        fail(f"phase 2's origin {origin}, want {step60} with SHA-256 {sha}")
    print("two_phase OK")


def subprocess_run(cmd):
    import subprocess
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        fail(f"{' '.join(cmd)}: exit {p.returncode}\n{p.stderr[-2000:]}")


if __name__ == "__main__":
    check, work = sys.argv[1], os.path.abspath(sys.argv[2])
    os.makedirs(work, exist_ok=True)
    globals()["check_" + check](work)
