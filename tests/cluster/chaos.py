"""The chaos soak: a pre-training on the simulated cluster (3 nodes x 2 ranks, launch/tupe-mpirun)
under a fault schedule drawn from a seed (chaos_faults.py: a rank's SIGKILL, a node killed, a
node's power cut, a node SIGSTOPped, a link flap, SIGTERM pre-emption, a full disk during a
save, Open MPI's orted killed). After each fault that ends the job it starts it again with
`--resume auto` on the nodes still up (a node hit sits out one attempt, is cleaned and
rejoins), the global batch constant. At the end it checks:
  - the final weights and optimizer state equal an uninterrupted 6-rank run's bitwise, whatever
    world sizes the attempts had (the job sums fixed one-sequence micro-batches' gradients in
    float64: dist.reduce_dtype fp64); with --replay, also those of a replay of the attempts'
    world sizes without the faults (chaos_runs.replay: each piece from the step one attempt
    resumed at to the next one's);
  - step, consumed samples (= steps x global batch) and data position equal;
  - no checkpoint seen whole was lost (only retention removes one), at most one not whole
    after a fault, every one left re-hashed against its manifest (chaos_report.check_ledger);
  - every fault ended the job within dist.timeout_s + abort grace + 30 s, or was survived;
  - no process on any node, no temporary under the checkpoint folder or the metrics, no
    tupe-mpirun temporary on a node.
It reports each fault's kind, detection time (fault -> job ended) and steps lost, and totals.

Usage: chaos.py WORK [--seed S] [--faults N] [--shards DIR] [--lock FILE] [--segment-minutes M] [--replay] [--fresh]
  WORK holds the state (chaos-state.json): run again with the same arguments to continue.
  --lock FILE: the cluster is started and stopped per segment of M minutes, each under an
  exclusive flock of FILE, released in between (other users of the one simulated cluster).
Environment: TUPE_BIN, TUPE_SOURCE_DIR, TUPE_SHARED_DATA. Exit 77 where namespaces are refused.
"""
import argparse
import fcntl
import json
import os
import re
import shutil
import sys
import time

from chaos_faults import DOWN_KINDS, NODE_KINDS, CheckpointDisk, Procs, clean_node_files, draw_schedule, inject, recover
from chaos_report import check_ledger, report, save_state, temp_entries
from chaos_runs import (GRACE_S, KEEP_LAST, NODES, PER_NODE, TIMEOUT_S, compare, finished, job_args, keep_final,
                        reference, replay)
from cluster_lib import (DATA, SRC, Cluster, fail, last_line, require_namespaces, single_rank, step_dir,
                         whole_checkpoints)

END_LIMIT = TIMEOUT_S + GRACE_S + 30  # a fault must end the job (or be survived) within this
STEP_RE = re.compile(r"step (\d+)/(\d+) \|")
RESUME_RE = re.compile(r"resumed from \S+ at step (\d+)")


def last_step(job):
    steps = STEP_RE.findall(open(job.out_path).read())
    return int(steps[-1][0]) if steps else None


def wait_step(job, target, limit, what):
    """Waits until the job logged step >= target; the step, or None when the job ended first."""
    t0 = time.time()
    while time.time() - t0 < limit:
        s = last_step(job)
        if s is not None and s >= target:
            return s
        if job.poll() is not None:
            return None
        time.sleep(0.05)
    fail(f"{what}: step {target} not reached within {limit} s (a hang?)\n{open(job.err_path).read()[-2000:]}")


def wait_end(job, limit, during=None):
    """Seconds until the job ended, or None when it still runs after `limit`; `during()` is
    called meanwhile (a full disk kept full)."""
    t0 = time.time()
    while time.time() - t0 < limit:
        if job.poll() is not None:
            return time.time() - t0
        if during:
            during()
        time.sleep(0.05)
    return None


def up_hosts(st, next_kind):
    """node1 and the nodes not sitting out; a node sitting out comes back early when the next
    fault needs a node besides node1."""
    out = [n for n in (f"node{i}" for i in range(1, NODES + 1)) if n == "node1" or st["out"].get(n, 0) == 0]
    if next_kind in NODE_KINDS and len(out) == 1:
        st["out"] = {}
        return up_hosts(st, None)
    return out


def checkpoint_bytes(ckpt):
    """The size of the newest whole checkpoint (24 MiB before the first)."""
    steps = whole_checkpoints(ckpt)
    if not steps:
        return 24 << 20
    d = step_dir(ckpt, steps[-1])
    return sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d))


def start_attempt(c, st, disk, hosts):
    """A job on `hosts`, expected to resume from the newest whole checkpoint (re-hashed here)."""
    world = PER_NODE * len(hosts)
    check_ledger(st, disk.ckpt, KEEP_LAST, "the previous attempt")
    attempt = {"n": len(st["attempts"]), "hosts": hosts, "world": world,
               "expect_resume": max(whole_checkpoints(disk.ckpt), default=0)}
    host, cmd = c.tupe_mpirun(st["work"], hosts, PER_NODE, job_args(st, disk.ckpt, world) + ["--resume", "auto"])
    attempt["t0"] = time.time()
    job = c.popen(host, ["env", f"TUPE_MPIRUN_ABORT_GRACE_S={GRACE_S}"] + cmd)
    st["out"] = {n: k - 1 for n, k in st["out"].items() if k > 1 and n not in hosts}  # sat out: rejoins next
    st["attempts"].append(attempt)
    print(f"attempt {attempt['n']}: {world} ranks on {','.join(hosts)}, expecting a resume at step "
          f"{attempt['expect_resume']}", flush=True)
    return job, attempt


def check_resume(job, attempt, st):
    """The attempt's first step logged: it resumed from the newest whole checkpoint."""
    out = open(job.out_path).read()
    m = RESUME_RE.search(out)
    got = int(m.group(1)) if m else 0
    attempt["resumed_at"], attempt["startup_s"] = got, round(time.time() - attempt["t0"], 2)
    ended = [r for r in st["records"] if r.get("ended")]
    if ended and "resumed_at" not in ended[-1]:  # the fault that ended the previous attempt
        ended[-1]["resumed_at"], ended[-1]["steps_lost"] = got, ended[-1]["last_step"] - got
    if got != attempt["expect_resume"]:
        fail(f"attempt {attempt['n']} resumed at step {got}, the newest whole checkpoint is step "
             f"{attempt['expect_resume']}:\n{out[-2000:]}")
    return got


def end_attempt(job, attempt, st):
    attempt["exit"] = job.returncode
    attempt["last_step"] = last_step(job) or attempt.get("resumed_at", 0)
    attempt["steps_trained"] = attempt["last_step"] - attempt.get("resumed_at", 0)
    attempt["last_line"] = last_line(open(job.err_path).read()) or last_line(open(job.out_path).read())
    if st["records"] and st["records"][-1].get("attempt") == attempt["n"]:
        st["records"][-1]["last_step"] = attempt["last_step"]


def run_fault(c, procs, st, disk, job, attempt, fault):
    """Waits for the fault's step, injects it, waits for the job to end (or to go on, after a
    flap); the fault's record. The job has ended when record["ended"]."""
    i, kind = st["next"], fault["kind"]
    at = wait_step(job, fault["at_step"], 300, f"fault {i} ({kind})")
    if at is None:
        fail(f"the job ended (exit {job.returncode}) before fault {i} at step {fault['at_step']}:\n"
             f"{open(job.err_path).read()[-2000:]}")
    if "resumed_at" not in attempt:
        check_resume(job, attempt, st)
    time.sleep(fault["delay_s"])
    rec = {"i": i, "kind": kind, "attempt": attempt["n"], "world": attempt["world"], "step_at_fault": last_step(job)}
    keep_full = None
    if kind == "disk_full":  # half a checkpoint left free (and kept so): the next save fails part-way
        keep = checkpoint_bytes(disk.ckpt) // 2
        rec["filler_mb"] = round(disk.fill(keep) / 2**20, 1)
        keep_full = lambda: disk.fill(keep)  # noqa: E731
    t_fault = time.time()
    rec["target"] = inject(c, procs, fault, attempt["hosts"])
    if rec["target"] is None:
        fail(f"fault {i} ({kind}): nothing to hit (no rank or daemon found)")
    if kind == "link_flap":  # survived when the job goes on 2 steps past the flap
        limit = END_LIMIT - (time.time() - t_fault)
        s = wait_step(job, rec["step_at_fault"] + 2, limit, f"fault {i} (link flap)")
        rec["survived"] = s is not None
        if rec["survived"]:
            rec["steps_lost"] = 0
    took = None if rec.get("survived") else wait_end(job, END_LIMIT, keep_full)
    if not rec.get("survived") and took is None:
        job.kill()
        fail(f"fault {i} ({kind} {rec['target']}): the job still runs {END_LIMIT} s later (a hang)\n"
             f"{open(job.err_path).read()[-3000:]}")
    rec["detect_s"] = None if took is None else round(time.time() - t_fault, 2)
    rec["ended"] = took is not None
    print(f"fault {i}: {kind} {rec['target']} at step {rec['step_at_fault']} on {attempt['world']} ranks: " +
          ("survived" if rec.get("survived") else f"the job ended {rec['detect_s']} s later, exit {job.returncode}"),
          flush=True)
    return rec


def cause_named(kind, target, exit_code, line, out):
    """Whether the job's last line (or, for a pre-emption, its output) says what happened."""
    if kind == "preempt":
        return exit_code == 0 and "pre-training stopped by signal" in out
    if kind == "rank_kill":  # (tupe-mpirun may also call the killed rank's node lost: README)
        return f"{target} ended by signal 9" in line or f"lost node {target.split()[-1]} " in line
    if kind == "disk_full":
        return "No space left on device" in line
    if kind == "link_flap":
        return "watchdog: rank" in line or f"lost node {target}" in line
    return f"lost node {target} " in line


def after_end(c, procs, st, disk, job, attempt, fault, rec):
    """The job ended after a fault: its record completed, the fault recovered, the checkpoints checked."""
    end_attempt(job, attempt, st)
    rec["exit"], rec["last_step"], rec["line"] = job.returncode, attempt["last_step"], attempt["last_line"]
    rec["named"] = cause_named(fault["kind"], rec["target"], job.returncode, attempt["last_line"],
                               open(job.out_path).read())
    rec["outlived"] = recover(c, procs, fault, rec["target"], disk, attempt["hosts"])
    rec["node_files"] = [f"{h}:{f}" for h in attempt["hosts"] for f in clean_node_files(c, h)]
    rec["partial"] = check_ledger(st, disk.ckpt, KEEP_LAST, f"fault {rec['i']} ({fault['kind']})")
    if fault["kind"] in DOWN_KINDS:
        st["out"][rec["target"]] = 1
    if fault["kind"] == "preempt" and (job.returncode != 0 or "stopped by signal" not in open(job.out_path).read()):
        fail(f"pre-emption: the job did not stop at a checkpoint (exit {job.returncode}):\n"
             f"{open(job.err_path).read()[-2000:]}")


def finish(c, procs, st, disk, job, attempt):
    """The last attempt runs to max_steps; nothing is left on any node."""
    if "resumed_at" not in attempt:
        if wait_step(job, attempt["expect_resume"] + 1, 300, "the last attempt") is None:
            fail(f"the last attempt ended before its first step:\n{open(job.err_path).read()[-2000:]}")
        check_resume(job, attempt, st)
    if wait_end(job, 600) is None:
        job.kill()
        fail("the last attempt did not end within 600 s")
    end_attempt(job, attempt, st)
    if job.returncode != 0 or f"pre-training finished at step {st['max_steps']}" not in open(job.out_path).read():
        fail(f"the last attempt did not finish (exit {job.returncode}):\n{open(job.err_path).read()[-2000:]}")
    check_ledger(st, disk.ckpt, KEEP_LAST, "the last attempt")
    time.sleep(1)
    left = [d for h in attempt["hosts"] for d in procs.describe(procs.on_node(h))]
    if left:
        fail(f"processes left on the nodes after the job finished: {left}")
    files = [f"{h}:{f}" for h in attempt["hosts"] for f in clean_node_files(c, h)]
    if any("tupe-mpirun-" in f for f in files):
        fail(f"tupe-mpirun's temporaries left on a node: {files}")
    st["final_node_files"] = files


def segment(st, disk, deadline):
    """One cluster from start to down: attempts and faults until the schedule is done or the
    deadline passed at an attempt's end."""
    with Cluster(st["work"], "sim", NODES) as c:
        procs = Procs(c)
        job = attempt = None
        while True:
            if job is None:
                if time.time() > deadline and st["next"] < len(st["schedule"]):
                    return False
                kind = st["schedule"][st["next"]]["kind"] if st["next"] < len(st["schedule"]) else None
                job, attempt = start_attempt(c, st, disk, up_hosts(st, kind))
            if st["next"] >= len(st["schedule"]):
                finish(c, procs, st, disk, job, attempt)
                return True
            fault = st["schedule"][st["next"]]
            rec = run_fault(c, procs, st, disk, job, attempt, fault)
            st["records"].append(rec)
            st["next"] += 1
            if rec["ended"]:
                after_end(c, procs, st, disk, job, attempt, fault, rec)
                job = None
            save_state(st, st["state_path"])


def make_shards(work):
    out = os.path.join(work, "shards")
    if not os.path.exists(os.path.join(out, "train-00000-of-00004.h5")):
        single_rank(["preprocess", "--config", os.path.join(SRC, "configs", "tiny.ini"),
                     "--input", os.path.join(DATA, "text", "wikitext-2", "wiki.test.raw"),
                     "--tokenizer.vocab", os.path.join(DATA, "vocab", "bert-base-uncased-vocab.txt"),
                     "--preprocess.num_shards", "4", "--output", out, "--overwrite", "--quiet"])
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("work")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--faults", type=int, default=8)
    ap.add_argument("--every", type=int, default=4, help="checkpoint.every_steps")
    ap.add_argument("--shards", default="", help="pre-training shards (default: made in WORK/shards)")
    ap.add_argument("--lock", default="", help="flock this file per segment")
    ap.add_argument("--segment-minutes", type=float, default=0, help="0: one segment")
    ap.add_argument("--report", default="", help="Markdown report (default WORK/chaos-report.md)")
    ap.add_argument("--replay", action="store_true",
                    help="also replay the attempts' world sizes without faults; the result must be bitwise equal")
    ap.add_argument("--fresh", action="store_true", help="discard a soak in WORK and start again")
    a = ap.parse_args()
    require_namespaces()
    work = os.path.abspath(a.work)
    os.makedirs(work, exist_ok=True)
    state_path = os.path.join(work, "chaos-state.json")
    if a.fresh:
        CheckpointDisk.unmount_at(os.path.join(work, "ckpt-fs"))
        for name in ("chaos-state.json", "ckpt-fs", "metrics", "uninterrupted", "ref", "replay", "final"):
            path = os.path.join(work, name)
            if os.path.isdir(path):
                shutil.rmtree(path)
            elif os.path.exists(path):
                os.remove(path)
    schedule = draw_schedule(a.seed, a.faults, a.every)
    if os.path.exists(state_path):
        st = json.load(open(state_path))
        if (st["seed"], len(st["schedule"]), st["every"]) != (a.seed, a.faults, a.every):
            fail(f"{state_path}: a soak of seed {st['seed']}, {len(st['schedule'])} faults, every {st['every']} "
                 f"is there; give the same arguments, or another folder")
        st["segments"] = st.get("segments", 0) + 1
        print(f"continuing the soak in {work} at fault {st['next']} of {len(st['schedule'])}", flush=True)
    else:
        st = {"seed": a.seed, "every": a.every, "schedule": schedule, "timeout_s": TIMEOUT_S, "grace_s": GRACE_S,
              "max_steps": schedule[-1]["at_step"] + 2 * a.every, "next": 0, "records": [], "attempts": [],
              "known": [], "out": {}, "wall_s": 0.0, "segments": 1}
    st.update(work=work, state_path=state_path, shards=os.path.abspath(a.shards) if a.shards else make_shards(work))
    disk = CheckpointDisk(os.path.join(work, "ckpt-fs"), 128)
    disk.release()  # a filler left by a soak stopped during a full-disk fault
    done = finished(st)
    while not done:
        t0 = time.time()
        deadline = t0 + a.segment_minutes * 60 if a.segment_minutes > 0 else float("inf")
        lock = open(a.lock, "a") if a.lock else None
        try:
            if lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                print(f"segment: took {a.lock} after {time.time() - t0:.0f} s", flush=True)
                t0 = time.time()
                deadline = t0 + a.segment_minutes * 60 if a.segment_minutes > 0 else float("inf")
            done = segment(st, disk, deadline)
        finally:
            st["wall_s"] += time.time() - t0
            save_state(st, state_path)
            report(st, a.report or os.path.join(work, "chaos-report.md"))  # also of a soak that failed
            if lock:
                lock.close()  # releases the flock
        if not done:
            time.sleep(5)  # others waiting for the lock get it
            st["segments"] += 1
    final = keep_final(st, disk.ckpt)
    problems = []
    runs = [("final", "the uninterrupted 6-rank run", reference)]
    if a.replay:
        runs.append(("final_replay", "the replay of its world sizes", replay))
    for key, what, make in runs:  # every comparison made, also when one failed
        try:
            st[key] = compare(st, final, make(st), what)
        except SystemExit as e:
            st[key] = str(e)
            problems.append(str(e))
    unnamed = [f"{r['i']} {r['kind']}: {r.get('line')}" for r in st["records"] if r.get("ended") and not r.get("named")]
    if unnamed:
        problems.append("FAILED: faults whose cause the job's last line does not name:\n" + "\n".join(unnamed))
    temps = temp_entries(disk.root) + temp_entries(os.path.join(work, "metrics"))
    if temps:
        problems.append(f"FAILED: temporaries left: {temps}")
    print(report(st, a.report or os.path.join(work, "chaos-report.md")), flush=True)
    save_state(st, state_path)
    if problems:
        raise SystemExit("\n".join(problems))
    disk.unmount()
    print(f"chaos OK: {len(st['records'])} faults, seed {a.seed}")


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    main()
