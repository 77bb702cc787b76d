"""bench/paper/paper.py --launcher slurm under a real Slurm on the simulated cluster (2 nodes,
2 CPUs each): the toy scale, rows BERT-A and TUPE-R (2 pre-training seeds each), WNLI.

Usage: slurm_paper.py WORKDIR
  submitted   with the partition down (nothing starts), Slurm holds what the harness designed:
              4 pre-trainings of 2 nodes x 1 task, the pilot after BERT-A seed 1, per
              pre-training one array of its fine-tunings after it and the pilot (afterok), the
              report after every array; submitting again submits nothing (every job is
              still queued: squeue) and keeps WORK/slurm/jobs.txt; then the partition comes up
  killed      TUPE-R seed 1 frozen (SIGSTOP to its ranks) once its step-5 checkpoint is whole,
              `scontrol requeue`d, thawed: it checkpoints on SIGTERM, is re-queued (held
              BeginTime, released), resumes from that checkpoint and completes; its final
              weights and data position equal the same command's run uninterrupted outside
              the cluster (2 ranks under plain mpirun)
  ordered     every fine-tuning started after its pre-training and the pilot ended, the
              report after every fine-tuning (Slurm's StartTime and EndTime)
  report      the report job completed; WORK/report.md has the rows BERT-A and TUPE-R with a
              WNLI entry, each equal to the mean over seeds of the median over fine-tuning
              seeds recomputed from the results.json files, which every fine-tuning wrote
Environment: TUPE_BIN, TUPE_SOURCE_DIR, TUPE_SHARED_DATA, TUPE_PYTHON.
"""
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import time
from datetime import datetime

from cluster_lib import (DATA, ENV, SRC, TUPE, Cluster, fail, max_rel_diff, require_namespaces, state, wait_for,
                         weights)
from slurm_checks import job_info

sys.path.insert(0, os.path.join(SRC, "bench", "paper"))
from plan import load_scale, plan_jobs  # noqa: E402

PAPER = os.path.join(SRC, "bench", "paper", "paper.py")
PYTHON = os.environ.get("TUPE_PYTHON", sys.executable)
ROWS = "BERT-A,TUPE-R"
KILLED = "pretrain-TUPE-R-seed1"
ENDED_BADLY = ("FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE", "PREEMPTED")


class Queue:
    """The last record Slurm showed of every job and array task (it forgets a finished job
    MinJobAge = 30 s after its end, so the check polls)."""

    def __init__(self, c, ids):
        self.c, self.seen = c, {}
        self.names = {jid: name for name, jid in ids.items()}

    def poll(self):
        p = self.c.run("head", ["scontrol", "show", "job", "-o"], check=False)
        for line in p.stdout.splitlines():
            rec = dict(kv.split("=", 1) for kv in line.split() if "=" in kv)
            if "JobId" not in rec:
                continue
            task = rec.get("ArrayTaskId", "")
            name = self.names.get(rec.get("ArrayJobId", rec["JobId"]), rec.get("JobName"))
            if task.isdigit():
                self.seen[(rec["ArrayJobId"], task)] = rec
            elif not task:
                self.seen[(rec["JobId"], "")] = rec
            # else: the tasks of an array still pending together ("0-1"): each is kept once it
            # shows alone
            if rec.get("JobState") in ENDED_BADLY:
                fail(f"{name} (job {rec['JobId']}) {rec['JobState']} ({rec.get('Reason')}); "
                     f"output {rec.get('StdOut')}:\n{tail(rec.get('StdOut'))}")
            if rec.get("Reason") == "DependencyNeverSatisfied":
                fail(f"{name} (job {rec['JobId']}) waits forever: DependencyNeverSatisfied ({rec.get('Dependency')})")
            if rec.get("JobState") == "PENDING" and rec.get("Reason") == "BeginTime":
                self.release(rec["JobId"])

    def release(self, job):
        """A re-queued job waits for its BeginTime (about 2 minutes); start it now, once no node
        still completes its previous run (else Slurm starts it there and kills it)."""
        states = self.c.run("head", ["sinfo", "-h", "-N", "-o", "%T"], check=False).stdout.split()
        if states and not any("comp" in s for s in states):
            time.sleep(2)
            self.c.run("head", ["scontrol", "update", f"JobId={job}", "StartTime=now"], check=False)
            print(f"released job {job} from its BeginTime hold")

    def of(self, job):
        """The records of `job`: itself, or every task of an array."""
        return [r for (jid, _), r in sorted(self.seen.items()) if jid == job]


def tail(path, n=3000):
    return open(path).read()[-n:] if path and os.path.exists(path) else "(no output)"


def afterok(rec):
    """The job ids a record depends on (afterok:ID or afterok:ID_*, each with its state)."""
    return set(re.findall(r"afterok:(\d+)", rec.get("Dependency", "")))


def check_submitted(c, ids):
    """Slurm's view of the submission, before anything ran."""
    info = {name: job_info(c, jid) for name, jid in ids.items()}
    pre = sorted(n for n in ids if n.startswith("pretrain-"))
    arrays = sorted(n for n in ids if n.startswith("glue-"))
    want_pre = [f"pretrain-{r}-seed{s}" for r in ("BERT-A", "TUPE-R") for s in (1, 2)]
    if pre != want_pre or arrays != sorted(p.replace("pretrain-", "glue-") for p in want_pre) or \
            set(ids) != set(pre + arrays + ["pilot", "report"]):
        fail(f"submitted {sorted(ids)}: expected {want_pre}, their glue arrays, the pilot and the report")
    for n in pre:
        i = info[n]
        if i.get("NumNodes") not in ("2", "2-2") or (i.get("NumTasks"), i.get("Requeue")) != ("2", "1") or afterok(i):
            fail(f"{n}: NumNodes {i.get('NumNodes')} NumTasks {i.get('NumTasks')} Requeue {i.get('Requeue')} "
                 f"Dependency {i.get('Dependency')}: expected 2 nodes x 1 task, requeueable, no dependency")
    want = {"pilot": {ids["pretrain-BERT-A-seed1"]}, "report": {ids[a] for a in arrays}}
    for a in arrays:
        want[a] = {ids[a.replace("glue-", "pretrain-")], ids["pilot"]}
    for n, deps in want.items():
        if afterok(info[n]) != deps:
            fail(f"{n} (job {ids[n]}): Dependency {info[n].get('Dependency')}, expected afterok on {sorted(deps)}")
    tasks = {a: info[a].get("ArrayTaskId") for a in arrays + ["pilot"]}
    # seed 1 of each row is fine-tuned at 50% and 100% of the steps (Figure 5c), seed 2 at 100%
    if tasks != {"glue-BERT-A-seed1": "0-1", "glue-BERT-A-seed2": "0", "glue-TUPE-R-seed1": "0-1",
                 "glue-TUPE-R-seed2": "0", "pilot": "0"}:
        fail(f"array tasks {tasks}")
    for n in sorted(want):
        print(f"  {n} (job {ids[n]}): Dependency={info[n].get('Dependency')}"
              + (f" ArrayTaskId={tasks[n]}" if n in tasks else ""))
    print(f"  {', '.join(pre)}: 2 nodes x 1 task each, no dependency")


def ranks_of(c, ckpt):
    """Pids (seen from this machine) of the `tupe` processes whose command line names `ckpt`."""
    pidns = open(os.path.join(c.dir, "pidns")).read().strip()
    found = []
    for p in os.listdir("/proc"):
        try:
            if not p.isdigit() or os.readlink(f"/proc/{p}/ns/pid") != pidns:
                continue
            if open(f"/proc/{p}/comm").read().strip() == "tupe" and ckpt in open(f"/proc/{p}/cmdline").read():
                found.append(int(p))
        except OSError:
            continue
    return found


def term_pending(pid):
    try:
        status = dict(line.split(":", 1) for line in open(f"/proc/{pid}/status").read().splitlines() if ":" in line)
    except OSError:
        return True
    bit = 1 << (signal.SIGTERM - 1)
    return status["State"].split()[0] != "T" or bool((int(status["ShdPnd"], 16) | int(status["SigPnd"], 16)) & bit)


def kill_mid_run(c, job, ckpt):
    """Freezes the job's ranks once its step-5 checkpoint is whole (a toy step lasts a few
    tens of ms: `scontrol requeue` alone could come after step 20), re-queues it and thaws
    the ranks once Slurm's SIGTERM is pending; the step they checkpoint at."""
    ranks = []

    def running():
        ranks[:] = ranks_of(c, ckpt)
        return len(ranks) == 2

    wait_for(running, 300, f"the 2 ranks of {KILLED} (job {job})")
    five = os.path.join(ckpt, "step_00000005", "manifest.json")
    t0 = time.time()
    while not os.path.exists(five):
        if time.time() - t0 > 120:
            fail(f"{KILLED}: no whole checkpoint at step 5 within 120 s")
        time.sleep(0.002)
    for pid in ranks:
        os.kill(pid, signal.SIGSTOP)
    if os.path.exists(os.path.join(ckpt, "step_00000020")):
        fail(f"{KILLED} reached step 20 before it was stopped")
    c.run("head", ["scontrol", "requeue", job])
    print(f"{KILLED} (job {job}): ranks {ranks} stopped after the step-5 checkpoint; scontrol requeue {job}")
    # Slurm signals the ranks it tracks (node1's; node2's hears it from rank 0 at the next step)
    wait_for(lambda: any(term_pending(pid) for pid in ranks), 30, "Slurm's SIGTERM pending in a rank")
    for pid in ranks:
        try:
            os.kill(pid, signal.SIGCONT)
        except ProcessLookupError:
            pass


def stamp(rec, key):
    return datetime.fromisoformat(rec[key])


def check_order(q, ids):
    """Each array task started after its dependencies ended; the report after every task."""
    def ended(name):
        recs = q.of(ids[name])
        if not recs or any(r.get("JobState") != "COMPLETED" for r in recs):
            fail(f"{name} (job {ids[name]}): {[r.get('JobState') for r in recs]}, expected COMPLETED")
        return max(stamp(r, "EndTime") for r in recs)

    for name in ids:
        if len(q.of(ids[name])) != (2 if name in ("glue-BERT-A-seed1", "glue-TUPE-R-seed1") else 1):
            fail(f"{name} (job {ids[name]}): {len(q.of(ids[name]))} task(s) seen")
        deps = [d for d in ids if ids[d] in afterok_of_design(name, ids)]
        for r in q.of(ids[name]):
            for d in deps:
                if stamp(r, "StartTime") < ended(d):
                    fail(f"{name} task {r.get('ArrayTaskId')} started {r['StartTime']}, before {d} ended")
    print("  ordered: " + "; ".join(f"{n} {min(r['StartTime'] for r in q.of(ids[n]))[11:]}-"
                                    f"{max(r['EndTime'] for r in q.of(ids[n]))[11:]}" for n in ids))


def afterok_of_design(name, ids):
    if name == "pilot":
        return {ids["pretrain-BERT-A-seed1"]}
    if name.startswith("glue-"):
        return {ids[name.replace("glue-", "pretrain-")], ids["pilot"]}
    if name == "report":
        return {ids[n] for n in ids if n.startswith("glue-")}
    return set()


def check_killed(q, ids, work):
    rec = q.of(ids[KILLED])[-1]
    text = tail(rec.get("StdOut"), 10**7)
    lines = text.splitlines()
    stop = [ln for ln in lines if ln.startswith("pre-training stopped by signal at step ")]
    shown = [ln for ln in lines if "stopped by signal" in ln or "resumed from" in ln or "finished at step" in ln
             or ln.startswith("tupe.sbatch: job")]
    print("\n".join("  " + ln for ln in shown))
    if int(rec.get("Restarts", "0")) < 1 or len(stop) != 1:
        fail(f"{KILLED}: Restarts {rec.get('Restarts')}, {len(stop)} stop line(s):\n{text[-4000:]}")
    at = int(re.match(r"pre-training stopped by signal at step (\d+)", stop[0]).group(1))
    if not 5 <= at < 20 or not any(re.match(rf"resumed from \S+/step_{at:08d} at step {at} ", ln) for ln in lines):
        fail(f"{KILLED}: stopped at step {at}; no resume from it:\n{text[-4000:]}")
    if not any(ln.startswith(f"tupe.sbatch: job {ids[KILLED]} stopped at a checkpoint on SIGTERM") for ln in lines):
        fail(f"{KILLED}: tupe.sbatch did not see the stop at a checkpoint on SIGTERM:\n{text[-4000:]}")
    failed = [ln for ln in lines if ln.startswith("tupe.sbatch:") and "ended with exit" in ln]
    if failed:
        fail(f"{KILLED}: an attempt failed: {failed[0]}")
    return at


def check_resumed_weights(work):
    """The re-queued pre-training's step-20 weights and data position against the same command
    run uninterrupted outside the cluster (2 ranks under plain mpirun)."""
    job = next(j for j in plan_jobs(load_scale("toy", work, ROWS)) if j.name == KILLED)
    cmd = list(job.command)  # TUPE_BIN pretrain ... --resume auto ... --checkpoint.dir CK
    ref = os.path.join(os.path.dirname(work), "uninterrupted")
    shutil.rmtree(ref, ignore_errors=True)
    at = cmd.index("--checkpoint.dir") + 1
    ck, cmd[at] = cmd[at], ref
    cmd[cmd.index("--resume") + 1] = "none"
    p = subprocess.run(["mpirun", "-np", "2", "--oversubscribe", "--bind-to", "none"] + cmd,
                       capture_output=True, text=True, env=ENV, timeout=600)
    if p.returncode != 0:
        fail(f"the uninterrupted reference failed (exit {p.returncode}):\n{p.stderr[-2000:]}")
    d = max_rel_diff(weights(ck, 20), weights(ref, 20))
    pos = (state(ck, 20)["data_position"], state(ref, 20)["data_position"])
    print(f"  {KILLED} re-queued vs uninterrupted (step 20): max relative difference {d:.3e}, data position {pos[0]}")
    if d > 1e-6 or pos[0] != pos[1]:
        fail(f"{KILLED}: differs from the uninterrupted run ({d:.3e} > 1e-6, or data position {pos})")


def check_pretrainings(q, ids):
    for name in sorted(n for n in ids if n.startswith("pretrain-")):
        rec = q.of(ids[name])[-1]
        text = tail(rec.get("StdOut"), 10**7)
        if rec.get("NodeList") != "node[1-2]" or "placement: node1 ranks 0; node2 ranks 1 (2 ranks on 2 nodes)" \
                not in text or "pre-training finished at step 20" not in text:
            fail(f"{name}: NodeList {rec.get('NodeList')}; expected 1 rank on each of node1, node2 and step 20:\n"
                 f"{text[-3000:]}")


def check_report(work):
    """report.md's rows and WNLI entries against the results.json of every fine-tuning."""
    scale = load_scale("toy", work, ROWS)
    finetunings = [m for j in plan_jobs(scale) if j.kind in ("pilot", "glue") for m in j.array]
    missing = [m.done_file for m in finetunings if not os.path.exists(m.done_file)]
    if len(finetunings) != 7 or missing:
        fail(f"{len(finetunings)} fine-tunings (expected 7: the pilot and 6); no results.json: {missing}")
    md = open(os.path.join(work, "report.md")).read()
    data = json.load(open(os.path.join(work, "report.json")))
    for row in ("BERT-A", "TUPE-R"):
        meds = []
        for seed in (1, 2):
            t = json.load(open(os.path.join(scale.glue_out(row, seed, 20, "WNLI"), "results.json")))["tasks"][0]
            meds.append(statistics.median(r["score"] for r in t["runs"] if r["lr"] == t["best_lr"]) * 100)
        want = statistics.mean(meds)
        got = data["rows"][row]["tasks"]["WNLI"]
        line = next((ln for ln in md.splitlines() if ln.startswith(f"| {row} | ")), "")
        if got is None or abs(got - want) > 1e-9 or not line.startswith(f"| {row} | {want:.1f} ["):
            fail(f"report: {row} WNLI {got} / '{line}', expected {want:.1f} (seeds' medians {meds})")
        print(f"  report: {line}")
    if "| row | WNLI | avg |" not in md:
        fail(f"report.md has no WNLI column:\n{md[:2000]}")


def main(work):
    require_namespaces()
    w = os.path.join(work, "paper")
    shutil.rmtree(w, ignore_errors=True)
    t0 = time.time()
    with Cluster(work, "sim", 2, slurm=True) as c:
        c.run("head", ["scontrol", "update", "PartitionName=sim", "State=DOWN"])
        env = ["env", f"TUPE_BIN={TUPE}", f"TUPE_SHARED_DATA={DATA}", f"TUPE_PYTHON={PYTHON}"]
        p = c.run("head", env + [PYTHON, PAPER, "--scale", "toy", "--rows", ROWS, "--launcher", "slurm",
                                 "--work", w], timeout=600)
        print(p.stdout.strip())
        ids = dict(line.split() for line in open(os.path.join(w, "slurm", "jobs.txt")))
        check_submitted(c, ids)
        again = c.run("head", env + [PYTHON, PAPER, "--scale", "toy", "--rows", ROWS, "--launcher", "slurm",
                                     "--work", w], timeout=600).stdout
        kept = dict(line.split() for line in open(os.path.join(w, "slurm", "jobs.txt")))
        if "] submitted " in again or kept != ids or again.count("not submitted again") != len(ids):
            fail(f"submitting again while every job is queued: expected none submitted, got:\n{again}")
        print(f"submitting again submits nothing: all {len(ids)} jobs are still queued")
        c.run("head", ["scontrol", "update", "PartitionName=sim", "State=UP"])
        print(f"submitted as designed ({len(ids)} jobs, {time.time() - t0:.1f} s); the partition is up")
        kill_mid_run(c, ids[KILLED], os.path.join(w, "pretrain", "TUPE-R-seed1", "checkpoints"))
        q = Queue(c, ids)
        deadline = time.time() + 1200
        while True:
            q.poll()
            report = q.of(ids["report"])
            if report and report[-1].get("JobState") == "COMPLETED":
                break
            if time.time() > deadline:
                fail(f"the report job not done after 1200 s: {[(k, r.get('JobState')) for k, r in q.seen.items()]}")
            time.sleep(1)
        print(f"the report job completed {time.time() - t0:.0f} s after the start")
        at = check_killed(q, ids, w)
        check_pretrainings(q, ids)
        check_order(q, ids)
    check_report(w)
    check_resumed_weights(w)
    print(f"paper OK: submitted as designed, {KILLED} re-queued and resumed from step {at}, dependencies kept, "
          f"report in {os.path.join(w, 'report.md')} ({time.time() - t0:.0f} s)")


if __name__ == "__main__":
    main(os.path.abspath(sys.argv[1]))
