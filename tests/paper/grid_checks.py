"""The pre-training LR grid of bench/paper/paper.py end to end at a toy size (Paper_grid_toy,
bench/paper/grid-toy.ini: BERT-A with 2 seeds and TUPE-R with 1, lr_grid = 1e-3, 3e-3 on the
first half of a 20-step schedule). Checks:
  - one command runs every grid run before any table job, then the table at each row's LR;
  - each grid record (WORK/grid) holds its run's own validation loss at step 10 (its metrics);
    the best LR per row recomputed here from them (the lowest, ties to the smaller) is the LR of
    every table pre-training of the row (its effective_config.ini and folder name), of its
    fine-tunings' checkpoints, of the report's Table 1 row and the grid table's bold entry;
  - seed 1's table pre-training continued the grid run at that LR: its log says it resumed from
    the grid's step_00000010 in the same folder, the folder keeps that checkpoint, and its
    metrics hold each step up to 10 once (not trained again); seed 2 started from scratch; the
    grid run at the other LR stopped at step 10;
  - a second run of the command runs no job but the report; a new work folder with the same
    store neither (the grid records come from the store) and draws the same Table 1 and grid;
  - the choice rule on made-up records: the lowest loss, a tie to the smaller LR, a record of
    another lr_grid_fraction ignored (the row waits);
  - --dry-run lists the 4 grid runs (train.max_steps 10), says the table jobs wait, writes nothing.
Usage: grid_checks.py WORKDIR   (TUPE_BIN, TUPE_SHARED_DATA from CTest)
"""
import configparser
import json
import os
import re
import shutil
import subprocess
import sys

from paper_checks import PAPER, SRC, check

SCALE = os.path.join(SRC, "bench", "paper", "grid-toy.ini")
ROWS = {"BERT-A": [1, 2], "TUPE-R": [1]}
LRS = [1e-3, 3e-3]
GRID_STEP, STEPS = 10, 20


def harness(work, *extra):
    p = subprocess.run([sys.executable, PAPER, "--scale", SCALE, "--work", work, *extra], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    check(p.returncode == 0, f"paper.py {' '.join(extra)} exited 0" + ("" if p.returncode == 0 else ":\n" + p.stdout[-3000:]))
    return p.stdout


def jobs_run(out):
    """The names of the jobs a run started, in order."""
    return [m.group(1) for m in re.finditer(r"^\[paper [0-9:]+\] (\S+): ", out, re.M)]


def records(metrics):
    with open(metrics) as f:
        return [json.loads(line) for line in f if line.strip()]


def tables(report):
    """Table 1's rows and the grid's rows of a report: {row: [cells]} each."""
    def rows_of(text):
        return {m.group(1): [c.strip() for c in m.group(2).split("|")]
                for m in re.finditer(r"^\| (\S+) \| (.+) \|$", text, re.M) if m.group(1) not in ("row", "---")}
    return rows_of(report.split("\n## ")[0]), rows_of(report.split("## The pre-training LR grid")[1].split("\n## ")[0])


def check_run(work, out):
    started = jobs_run(out)
    grid = [i for i, n in enumerate(started) if n.startswith("grid-")]
    table = [i for i, n in enumerate(started) if n.startswith(("pretrain-", "glue-"))]
    check(len(grid) == 4 and table and max(grid) < min(table),
          f"the 4 grid runs ran before any table job: {started}")
    report = open(os.path.join(work, "report.md")).read()
    table1, grid_table = tables(report)
    for row, seeds in ROWS.items():
        losses = {}
        for lr in LRS:
            rec = json.load(open(os.path.join(work, "grid", f"{row}-lr{lr:g}.json")))
            folder = os.path.join(work, "pretrain", f"{row}-lr{lr:g}-seed1", "checkpoints")
            own = [r["validation_loss"] for r in records(os.path.join(folder, "metrics", "rank_0.jsonl"))
                   if r.get("step") == GRID_STEP and "validation_loss" in r]
            check(rec["step"] == GRID_STEP and len(own) == 1 and rec["validation_loss"] == own[0] and rec["lr"] == lr,
                  f"{row} at LR {lr:g}: the grid record's loss {rec['validation_loss']} is its run's own at step "
                  f"{GRID_STEP} {own}")
            losses[lr] = own[0]
        best = min(LRS, key=lambda lr: (losses[lr], lr))
        other = next(lr for lr in LRS if lr != best)
        cells = grid_table.get(row, [])
        check(cells == [(f"**{losses[lr]:.4f}**" if lr == best else f"{losses[lr]:.4f}") for lr in LRS] + [f"{best:g}"],
              f"{row}: the report's grid row {cells} marks LR {best:g} (losses {losses})")
        check(table1.get(row, [""])[0] == f"{best:g}", f"{row}: Table 1 says LR {best:g} ({table1.get(row)})")
        for seed in seeds:
            run = os.path.join(work, "pretrain", f"{row}-lr{best:g}-seed{seed}")
            cfg = configparser.ConfigParser(interpolation=None)
            cfg.read(os.path.join(run, "checkpoints", "effective_config.ini"))
            check(float(cfg["optimizer"]["lr"]) == best and cfg["optimizer"]["total_steps"] == str(STEPS)
                  and os.path.isdir(os.path.join(run, "checkpoints", f"step_{STEPS:08d}")),
                  f"{row} seed {seed}: pre-trained to step {STEPS} at optimizer.lr = {cfg['optimizer']['lr']} "
                  f"(the grid's best, {best:g})")
            res = json.load(open(os.path.join(work, "glue", f"{row}-lr{best:g}-seed{seed}", f"step{STEPS}", "WNLI",
                                              "results.json")))
            check(res["pretrain_steps"] == STEPS, f"{row} seed {seed}: fine-tuned from that run's step {STEPS}")
            log = open(os.path.join(work, "logs", f"pretrain-{row}-lr{best:g}-seed{seed}.log")).read()
            if seed == 1:
                metrics = records(os.path.join(run, "checkpoints", "metrics", "rank_0.jsonl"))
                steps = [r["step"] for r in metrics if "consumed_samples" in r]  # the training records
                starts = [r["step"] for r in metrics if "build" in r]  # one record where each process started
                check(f"resumed from {run}/checkpoints/step_{GRID_STEP:08d} at step {GRID_STEP}" in log
                      and os.path.isdir(os.path.join(run, "checkpoints", f"step_{GRID_STEP:08d}"))
                      and starts == [0, GRID_STEP] and steps == sorted(set(steps)) and max(steps) == STEPS,
                      f"{row} seed 1 continued its grid run from step {GRID_STEP} in its folder (started at steps "
                      f"{starts}; training records at {steps})")
            else:
                check("resumed from" not in log, f"{row} seed {seed}: trained from step 0 at LR {best:g}")
        stopped = os.path.join(work, "pretrain", f"{row}-lr{other:g}-seed1", "checkpoints")
        check(os.path.isdir(os.path.join(stopped, f"step_{GRID_STEP:08d}")) and
              not os.path.exists(os.path.join(stopped, f"step_{STEPS:08d}")) and
              not os.path.exists(os.path.join(work, "pretrain", f"{row}-lr{other:g}-seed2")),
              f"{row}: the grid run at LR {other:g} stopped at step {GRID_STEP}, and nothing else ran at that LR")
    return report


def check_rule(work):
    """The choice on made-up records (no training): lowest loss, ties to the smaller LR."""
    sys.path.insert(0, os.path.join(SRC, "bench", "paper"))
    from plan import load_scale
    fake = work + "-rule"
    shutil.rmtree(fake, ignore_errors=True)
    os.makedirs(os.path.join(fake, "grid"))
    made = {("BERT-A", 1e-3): (GRID_STEP, 5.0), ("BERT-A", 3e-3): (GRID_STEP, 4.0),
            ("TUPE-R", 1e-3): (GRID_STEP, 4.5), ("TUPE-R", 3e-3): (GRID_STEP, 4.5)}
    for (row, lr), (step, loss) in made.items():
        json.dump({"step": step, "validation_loss": loss}, open(os.path.join(fake, "grid", f"{row}-lr{lr:g}.json"), "w"))
    s = load_scale(SCALE, fake)
    check(s.best_lr == {"BERT-A": 3e-3, "TUPE-R": 1e-3} and s.run_name("TUPE-R") == "TUPE-R-lr0.001",
          f"made-up grids: the lower loss wins (BERT-A 3e-3), a tie goes to the smaller LR (TUPE-R 1e-3): {s.best_lr}")
    json.dump({"step": 7, "validation_loss": 1.0}, open(os.path.join(fake, "grid", "BERT-A-lr0.003.json"), "w"))
    s = load_scale(SCALE, fake)
    check(s.waiting_rows() == ["BERT-A"] and s.best_lr == {"TUPE-R": 1e-3},
          f"a record of another grid length is not taken: BERT-A waits ({s.waiting_rows()})")


def main(work):
    for d in (work, work + "-store", work + "-elsewhere", work + "-dry"):
        shutil.rmtree(d, ignore_errors=True)
    store = work + "-store"
    report = check_run(work, harness(work, "--store", store))
    ran = jobs_run(harness(work, "--store", store))
    check(ran == ["report"], f"a second run runs no job but the report: {ran}")
    elsewhere = work + "-elsewhere"
    ran = jobs_run(harness(elsewhere, "--store", store))
    moved = open(os.path.join(elsewhere, "report.md")).read()
    check(ran == ["report"] and tables(moved) == tables(report),
          f"a new work folder with the same store runs no job but the report, the same Table 1 and grid: {ran}")
    check_rule(work)
    dry = harness(work + "-dry", "--dry-run", "--store", "")
    pretrains = [line for line in dry.splitlines() if " pretrain " in line]
    check(len(pretrains) == 4 and all(line.endswith(f"--train.max_steps {GRID_STEP}") for line in pretrains)
          and "# the table jobs of BERT-A, TUPE-R" in dry and "wait for their LR grid" in dry
          and not os.path.exists(work + "-dry"),
          f"--dry-run lists the 4 grid runs only and says the table jobs wait ({len(pretrains)} pre-trainings)")
    print("all checks passed")


if __name__ == "__main__":
    main(sys.argv[1])
