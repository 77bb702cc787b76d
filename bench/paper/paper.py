"""The paper's Table 1 (Ke, He and Liu, ICLR 2021) at any scale: eight rows pre-trained and
fine-tuned with one recipe and one GLUE protocol per scale, on this machine (--launcher local)
or on a Slurm cluster (--launcher slurm), then the report (report.py: Table 1's layout with
medians and spreads, TUPE-R - BERT-A with a 95% interval, Figure 5a and 5c).

Usage: python bench/paper/paper.py --scale mini|base|toy|FILE.ini [--launcher local|slurm]
           [--work DIR] [--rows A,B] [--only pretrain|pilot|glue|report] [--dry-run]
           [--parallel N] [--store DIR]
  Resumable at every step: rerun the same command after any stop. A pre-training continues
  from its newest checkpoint (`--resume auto`), a fine-tuning whose results.json exists is
  kept, a half-done one starts again; with slurm, jobs already done are not submitted again.
  --dry-run prints every command (tupe lines, or sbatch lines with their dependencies) and runs
  nothing. --parallel N runs up to N local jobs at once. The results store ([paper] store, or
  --store DIR; store.py) keeps each finished job's results, so that a run goes on from them on
  another machine: the mini scale's is bench/paper/results-mini, in the repository.
  With [paper] lr_grid, each row is first pre-trained at each LR of the grid on the first
  lr_grid_fraction of its schedule; a row's table jobs are planned once its grid is done, at its
  best LR. The local launcher plans again as grids end; with Slurm, run the command again once
  the grid jobs have ended (docs/paper.md).
Environment: TUPE_BIN (build/cli/tupe), TUPE_SHARED_DATA (../shared/data), TUPE_PYTHON.
The scale files and what each key means: bench/paper/*.ini; the workflow: docs/paper.md.
"""
import argparse
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time

from plan import Job, check_done_settings, grid_ini, leaves, load_scale, plan_jobs, write_grid_record
from scale_check import SLURM_KEYS, lr_name
from store import Store, write_complete

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


def log(msg):
    print(f"[paper {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def start_local(job: Job):
    """Starts one job here (its output appended to its log); a killed fine-tuning starts again."""
    log(f"{job.name}: {job.describe}")
    os.makedirs(os.path.dirname(job.log_file), exist_ok=True)
    if job.scratch:
        shutil.rmtree(job.scratch, ignore_errors=True)
    out = open(job.log_file, "a")
    proc = subprocess.Popen(job.command, stdout=out, stderr=subprocess.STDOUT)
    out.close()
    return proc


def run_local(leaves, scale, store: Store, parallel: int, dry_run: bool):
    """Runs every job not yet done, up to `parallel` at once, each when what it waits for is
    done, in the plan's order of preference. The GLUE fine-tunings wait while [paper]
    protocol_chosen is false. When a pre-training's last fine-tuning is done, the report of what
    is done so far is drawn (WORK/report.md, and into the store). A failed job stops the run (the
    others are stopped with SIGTERM: a pre-training checkpoints and exits, a fine-tuning starts
    again next time). A grid run that ends leaves its record (WORK/grid) for the next plan."""
    pending = [(j, d) for j, d in leaves if not j.done()]
    deps_of = {j.name: d for j, d in leaves}
    if dry_run:
        for j, _ in pending:
            if j.kind == "grid":
                print(f"# {j.name}: {j.describe}")
            print(shlex.join(j.command))
        return
    unfinished = {j.name for j, _ in pending}
    running = {}
    report = next((j for j, _ in pending if j.kind == "report"), None)

    def stop(signum, _frame):  # SIGTERM or Ctrl-C: each running job stopped the way it resumes
        for proc in running:
            proc.terminate()
        for proc in running:
            proc.wait()
        log(f"stopped by signal {signum}: {', '.join(j.name for j in running.values()) or 'no job'} stopped; "
            "rerun the same command to go on")
        sys.exit(128 + signum)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    waiting_for_protocol = False
    while pending or running:
        for item in list(pending):
            job, deps = item
            if len(running) >= parallel:
                break
            if job.kind == "glue" and not scale.protocol_chosen:
                waiting_for_protocol = True
                continue
            if any(d in unfinished for d in deps):
                continue
            pending.remove(item)
            running[start_local(job)] = job
        if not running:
            break  # the rest waits for the protocol (or for jobs outside --only)
        proc = wait_any(running)
        job = running.pop(proc)
        if proc.returncode != 0:
            for other in running:
                other.terminate()
            for other in running:
                other.wait()
            with open(job.log_file) as f:
                tail = f.read().splitlines()[-5:]
            sys.exit(f"paper: {job.name} failed (exit {proc.returncode}); {job.log_file} ends:\n  " + "\n  ".join(tail))
        if job.kind == "pretrain" and not job.done():  # stopped at a checkpoint (SIGTERM): not done
            sys.exit(f"paper: {job.name} stopped before its last step; rerun to resume it ({job.log_file})")
        if job.kind == "grid" and not write_grid_record(scale, job):
            sys.exit(f"paper: {job.name} ended without a validation loss at step {scale.grid_step} (stopped early, or "
                     f"its folder {job.run_dir} was already past that step: remove it); rerun to go on ({job.log_file})")
        job.finish()
        if job.kind == "pretrain":
            write_complete(job, scale.steps)
        store.save(job)
        unfinished.discard(job.name)
        if report and job.kind == "glue":
            others = [j for j, _ in pending if j is not report] + list(running.values())
            group = deps_of[job.name][0]  # a fine-tuning's first dependency: its pre-training
            if others and not any(j.kind == "glue" and deps_of[j.name][0] == group for j in others):
                draw_report(report, store, scale.work)  # its fine-tunings are all done; more to come
    if waiting_for_protocol:
        log("the GLUE stage waits: [paper] protocol_chosen = false (choose [finetune] from the pilot's "
            f"numbers, {os.path.join(scale.work, 'pilot')}, then set it true)")


def draw_report(report: Job, store: Store, work: str):
    """The report of what is done so far (mid-run, after each pre-training's last fine-tuning),
    into WORK and the store; a report that fails is logged, and the run goes on."""
    with open(report.log_file, "a") as out:
        code = subprocess.run(report.command, stdout=out, stderr=subprocess.STDOUT).returncode
    if code != 0:
        log(f"the report so far failed (exit {code}; {report.log_file}); the run goes on")
        return
    store.save(report)
    log(f"the report so far: {os.path.join(work, 'report.md')}")


def wait_any(running):
    """The first of the running processes to end (polled once a second)."""
    while True:
        for proc in running:
            if proc.poll() is not None:
                return proc
        time.sleep(1)


def sbatch_line(job: Job, scale, deps) -> list:
    """The sbatch command of `job` (a pre-training through launch/tupe.sbatch; the others
    through bench/paper/job.sbatch, which runs one command line of a list: job arrays)."""
    s = scale.paper
    out = os.path.join(scale.work, "slurm", f"{job.name}-%A_%a.out" if job.array else f"{job.name}-%j.out")
    cmd = ["sbatch", "--parsable", f"--job-name=paper-{job.name}", f"--output={out}"]
    if deps:
        cmd.append("--dependency=afterok:" + ":".join(deps))
    if job.kind in ("pretrain", "grid"):
        # --cpus-per-task: launch/tupe.sbatch asks for 8, more than a small node may have.
        cmd += [f"--nodes={s['slurm_pretrain_nodes']}", f"--ntasks-per-node={s['slurm_pretrain_tasks_per_node']}",
                f"--cpus-per-task={s['threads']}", f"--gpus-per-node={s['slurm_gpus_per_node']}",
                f"--time={s['slurm_pretrain_time']}",
                f"--export=ALL,TUPE_BIN={scale.tupe},TUPE_CONFIG={scale.run_config},"
                f"TUPE_GPUS_PER_NODE={s['slurm_gpus_per_node']},TUPE_LAUNCHER={s.get('slurm_launcher', 'srun')}",
                os.path.join(REPO, "launch", "tupe.sbatch")] + job.command[job.command.index("--resume") + 2:]
        return cmd
    cmd += ["--nodes=1", "--ntasks=1", f"--cpus-per-task={s['threads']}", f"--time={s['slurm_finetune_time']}"]
    if int(s["slurm_gpus_per_node"]) > 0 and job.kind != "report":
        cmd.append("--gres=gpu:1")  # one fine-tuning per GPU
    cmd += ["--requeue", os.path.join(HERE, "job.sbatch"), job.list_file]
    if job.array:
        cmd.insert(2, f"--array=0-{len(job.array) - 1}")
    return cmd


def queued_jobs(work):
    """{job name: Slurm id} of this work folder's earlier submissions (WORK/slurm/jobs.txt)
    that Slurm still holds (squeue: pending, running or re-queued): not submitted again."""
    path = os.path.join(work, "slurm", "jobs.txt")
    if not os.path.exists(path):
        return {}
    last = {}
    for line in open(path):
        words = line.split()
        if len(words) == 2:
            last[words[0]] = words[1]
    if not last:
        return {}
    try:
        p = subprocess.run(["squeue", "-h", "-o", "%A", "-u", os.environ.get("USER") or str(os.getuid())],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as e:
        sys.exit(f"paper: squeue, to see which of {path}'s jobs are still queued, failed ({e}); "
                 "is this a Slurm login node?")
    if p.returncode != 0:
        sys.exit(f"paper: squeue, to see which of {path}'s jobs are still queued, failed: "
                 + " ".join(p.stderr.split()))
    alive = set(p.stdout.split())
    return {name: jid for name, jid in last.items() if jid in alive}


def submit_slurm(jobs, scale, dry_run: bool):
    """One sbatch per pre-training; per pre-training, its fine-tunings as one job array that
    depends on it (afterok); the pilot after BERT-A's first seed; the report after everything.
    A job done, or still queued from an earlier submission, is not submitted again (later jobs
    then depend on the queued one). Each id is recorded in WORK/slurm/jobs.txt as soon as
    sbatch gives it; --dry-run writes nothing and shows made-up ids."""
    for key in SLURM_KEYS:
        if key not in scale.paper:
            sys.exit(f"paper: {scale.path}: [paper] {key} missing (the Slurm launcher needs it)")
    ids = {}
    fake = iter(range(1000, 100000))
    slurm_dir = os.path.join(scale.work, "slurm")
    queued = {} if dry_run else queued_jobs(scale.work)
    if not dry_run:
        os.makedirs(slurm_dir, exist_ok=True)
    for job in jobs:
        pending = [j for j in (job.array or [job]) if not j.done()]
        if not pending and job.kind != "report":
            continue
        if job.name in queued:
            ids[job.name] = queued[job.name]
            log(f"{job.name} is still queued as job {ids[job.name]}: not submitted again")
            continue
        if job.array:  # only the fine-tunings still to do
            job.array = pending
        deps = [ids[d] for d in job.depends if d in ids]
        if job.list_file and not dry_run:
            with open(job.list_file + ".tmp", "w") as f:
                for j in job.array or [job]:
                    f.write(shlex.join(j.shell_command()) + "\n")
            os.replace(job.list_file + ".tmp", job.list_file)
        cmd = sbatch_line(job, scale, deps)
        if dry_run:
            ids[job.name] = str(next(fake))
            print(f"# {job.name} -> job {ids[job.name]}")
            print(shlex.join(cmd))
            continue
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)
        if p.returncode != 0:
            sys.exit(f"paper: sbatch for {job.name} failed (exit {p.returncode}): {' '.join(p.stderr.split())}; "
                     f"the jobs submitted before it are in {os.path.join(slurm_dir, 'jobs.txt')}: rerun to go on")
        ids[job.name] = p.stdout.strip().split(";")[0]
        with open(os.path.join(slurm_dir, "jobs.txt"), "a") as f:
            f.write(f"{job.name} {ids[job.name]}\n")
        log(f"submitted {job.name} as job {ids[job.name]}" + (f" after {','.join(deps)}" if deps else ""))


def prepare_work(work, dry_run):
    """The work folder made (or, for --dry-run, only checked); exits with one line where it
    cannot be."""
    if os.path.exists(work) and not os.path.isdir(work):
        sys.exit(f"paper: --work {work}: a file, not a folder")
    if dry_run:
        return
    try:
        os.makedirs(work, exist_ok=True)
        probe = os.path.join(work, ".write-test")
        open(probe, "w").close()
        os.remove(probe)
    except OSError as e:
        sys.exit(f"paper: --work {work}: cannot write there ({e.strerror})")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].replace("\n", " "))
    ap.add_argument("--scale", required=True, help="mini, base, toy, or an INI file laid out as bench/paper/mini.ini")
    ap.add_argument("--launcher", choices=["local", "slurm"], default="local")
    ap.add_argument("--work", help="the run's folder (default runs/paper-<scale>)")
    ap.add_argument("--only", choices=["pretrain", "pilot", "glue", "report"],
                    help="these jobs only (pretrain: the LR grid's runs too)")
    ap.add_argument("--rows", help="comma-separated: these rows only (e.g. BERT-A,TUPE-R)")
    ap.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
    ap.add_argument("--parallel", type=int, default=1,
                    help="local: run up to N jobs at once (each with [paper] threads; N x threads <= cores)")
    ap.add_argument("--store", help="the results store ([paper] store of the scale file by default; '' for none)")
    args = ap.parse_args()
    if args.parallel < 1:
        sys.exit(f"paper: --parallel {args.parallel}: must be at least 1")
    scale = load_scale(args.scale, args.work, args.rows)
    if not args.dry_run and not os.path.isdir(os.path.join(scale.data, "glue")):
        sys.exit(f"paper: the data folder {scale.data} has no glue/ (set TUPE_SHARED_DATA to the folder "
                 "holding glue/, text/ and vocab/)")
    prepare_work(scale.work, args.dry_run)
    scale.check_rows_with_tupe()
    if args.only == "pilot" and not scale.paper.get("pilot_learning_rates"):
        sys.exit(f"paper: --only pilot: {scale.path} has no pilot ([paper] pilot_learning_rates)")
    store = Store(scale.store if args.store is None else args.store, scale.work)
    if not args.dry_run:
        store.check()
        scale.write_run_config()
    corpus_made = False
    while True:  # once, or again each time an LR grid is done: its row's table jobs are planned then
        jobs = plan_jobs(scale)
        if not args.dry_run:
            restored = store.restore([j for j, _ in leaves(jobs)])
            if restored:
                log(f"{restored} finished jobs taken from the store {store.root}")
            record_grids(scale, jobs, store)
        check_done_settings(scale, [j for j, _ in leaves(jobs)])
        if grids_resolved(scale):  # grids found done (in the store, or run by Slurm): plan again
            continue
        if not args.dry_run and not corpus_made and args.only in (None, "pretrain"):  # the others need no corpus
            try:
                scale.make_corpus()
            except subprocess.CalledProcessError as e:
                sys.exit(f"paper: making the corpus {scale.paper.get('corpus')} in {os.path.join(scale.work, 'shards')} "
                         f"with {scale.tupe} failed (exit {e.returncode})")
            corpus_made = True
        if args.only:
            jobs = [j for j in jobs if j.kind == args.only or (args.only == "pretrain" and j.kind == "grid")]
        if args.launcher == "slurm":
            if scale.waiting_rows():  # the report comes with the table jobs, submitted once the grids are done
                jobs = [j for j in jobs if j.kind != "report"]
            submit_slurm(jobs, scale, args.dry_run)
            say_waiting(scale, "run this command again once the grid jobs have ended")
            return
        run_local(leaves(jobs), scale, store, args.parallel, args.dry_run)
        if args.dry_run:
            say_waiting(scale, "the local launcher plans them as each row's grid ends")
            break
        if not grids_resolved(scale):
            break
    log("done" if not args.dry_run else "(dry run)")


def record_grids(scale, jobs, store: Store):
    """Grid runs done without a record (run by Slurm, or stopped after their last evaluation):
    their record written (WORK/grid) and kept in the store."""
    for job in jobs:
        if job.kind == "grid" and job.done() and not (os.path.exists(job.done_file) and os.path.exists(grid_ini(job))):
            if write_grid_record(scale, job):
                store.save(job)


def grids_resolved(scale):
    """Re-reads the grids; True (and each newly chosen LR logged) when a row's grid got done
    since the last plan."""
    before = dict(scale.best_lr)
    scale.resolve_grid()
    new = [r for r in scale.best_lr if r not in before]
    for r in new:
        losses = ", ".join(f"{lr_name(lr)} -> {v:.4f}" for lr, v in scale.grid_losses[r].items())
        log(f"LR grid of {r}: LR {lr_name(scale.best_lr[r])} chosen (validation loss at step {scale.grid_step}: {losses})")
    return bool(new)


def say_waiting(scale, then):
    """One line (a comment, as --dry-run prints) for the rows whose table jobs wait for their grid."""
    waiting = scale.waiting_rows()
    if waiting:
        print(f"# the table jobs of {', '.join(waiting)} (their pre-trainings at the chosen LR and all that follows them) wait "
              f"for their LR grid: {then}", flush=True)


if __name__ == "__main__":
    main()
