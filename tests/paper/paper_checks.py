"""bench/paper/paper.py end to end at the toy scale (Paper_toy): one command runs all eight
rows of Table 1 (pre-training, the pilot, the fine-tunings, the report) on this machine.

Checks:
  - the report has Table 1's eight rows, and each entry equals the median over the fine-tuning
    seeds at the best LR recomputed here from each results.json's runs (its own per-seed
    scores), x100; a row with 2 pre-training seeds shows the mean of their medians;
  - the ^mid rows were fine-tuned from the checkpoint at mid_fraction of the steps, the others
    from the last (results.json's pretrain_steps), and BERT-A^d from a bert-absolute-untied run;
  - TUPE-R - BERT-A's interval equals Welch's, recomputed with scipy from the same per-seed
    medians; Figures 5a and 5c exist;
  - the run is made with --parallel 2 (two jobs at once, each after what it waits for) and a
    results store; a second run of the same command runs no job but the report (resumable);
    a run in a new, empty work folder with the same store (another machine) runs no job
    either and writes the same Table 1 and interval, and Figure 5a from the stored curves;
  - the same work folder under a scale file asking other settings (40 steps) is refused:
    finished results are never taken as done for other settings;
  - --dry-run lists every command without running one.
Usage: paper_checks.py WORKDIR   (TUPE_BIN, TUPE_SHARED_DATA, TUPE_PYTHON from CTest)
"""
import json
import os
import re
import shutil
import statistics
import subprocess
import sys

SRC = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PAPER = os.path.join(SRC, "bench", "paper", "paper.py")


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        sys.exit(1)


def harness(work, *extra):
    p = subprocess.run([sys.executable, PAPER, "--scale", "toy", "--work", work, *extra], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    check(p.returncode == 0, f"paper.py {' '.join(extra)} exited 0" + ("" if p.returncode == 0 else ":\n" + p.stdout[-3000:]))
    return p.stdout


def best_lr_median(results):
    """The dev median x100 at the LR whose runs' median selection score is best (the selection
    split's, or the dev set's without one), recomputed from the runs; and the pre-training steps."""
    t = json.load(open(results))["tasks"][0]
    chosen_by, dev = {}, {}  # in the grid's order (runs are LR-major): ties go to the earlier LR
    for r in t["runs"]:
        chosen_by.setdefault(r["lr"], []).append(r.get("selection_score", r["score"]))
        dev.setdefault(r["lr"], []).append(r["score"])
    order = list(chosen_by)
    best = max(order, key=lambda lr: (statistics.median(chosen_by[lr]), -order.index(lr)))
    check(best == t["best_lr"], f"{results}: best LR {t['best_lr']}, recomputed {best}")
    return 100 * statistics.median(dev[best]), json.load(open(results))["pretrain_steps"]


def check_dev_scored_once(work):
    """Every fine-tuning of the toy (selection_fraction 0.1 of the 64 WNLI train rows it keeps):
    epochs and LRs chosen on the 6 held-out rows, the dev set scored exactly once per run."""
    found = [os.path.join(d, "results.json") for d, _, files in os.walk(work) if "results.json" in files]
    runs = bad = 0
    for f in found:
        t = json.load(open(f))["tasks"][0]
        ok = t.get("chosen_on") == "selection" and t.get("selection_rows") == int(0.1 * 64 + 0.5) and t["train_rows"] == 58
        for r in t["runs"]:
            runs += 1
            ok = ok and r.get("dev_evaluations") == 1 and all("selection" in e and not e["dev"] for e in r["epochs"])
        bad += not ok
    check(found and runs and not bad, f"{len(found)} fine-tunings, {runs} runs: each chose on the selection split "
                                      f"(6 of 64 rows) and scored the dev set once ({bad} did not)")


def main(work):
    shutil.rmtree(work, ignore_errors=True)
    store = work + "-store"
    shutil.rmtree(store, ignore_errors=True)
    first = harness(work, "--parallel", "2", "--store", store)
    drawn = first.count("the report so far:")
    check(1 <= drawn < 8, f"a report is drawn mid-run as pre-trainings' fine-tunings end ({drawn} of 8 groups)")
    report = open(os.path.join(work, "report.md")).read()
    rows = {"BERT-A": ("BERT-A", [1, 2], 20), "BERT-R": ("BERT-R", [1], 20), "TUPE-A": ("TUPE-A", [1], 20),
            "TUPE-R": ("TUPE-R", [1, 2], 20), "TUPE-A-mid": ("TUPE-A", [1], 10), "TUPE-R-mid": ("TUPE-R", [1, 2], 10),
            "TUPE-A-tie-cls": ("TUPE-A-tie-cls", [1], 20), "BERT-A-d": ("BERT-A-d", [1], 20)}
    first_table = report.split("\n## ")[0]  # Table 1 comes before the difference and the figures
    table = {m.group(1): m.group(2) for m in re.finditer(r"^\| (\S+) \| ([^|]+) \|", first_table, re.M)}
    check(all(r in table for r in rows), f"the report has the eight rows: {sorted(table)}")
    medians = {}
    for row, (run, seeds, step) in rows.items():
        vals = []
        for seed in seeds:
            res = os.path.join(work, "glue", f"{run}-seed{seed}", f"step{step}", "WNLI", "results.json")
            m, steps = best_lr_median(res)
            check(steps == step, f"{row} seed {seed}: fine-tuned from step {steps} == {step}")
            vals.append(m)
        medians[row] = vals
        want = statistics.mean(vals)
        got = float(table[row].split()[0])
        check(abs(got - want) < 0.051, f"{row}: WNLI {got} == {want:.2f} (recomputed from the runs)")
    data = os.environ.get("TUPE_SHARED_DATA", os.path.join(SRC, "..", "shared", "data"))
    labels = [line.rstrip("\n").split("\t")[-1] for line in open(os.path.join(data, "glue", "WNLI", "dev.tsv"))][1:]
    want = 100 * max(labels.count(v) for v in set(labels)) / len(labels)
    m = re.search(r"^\| majority class \| ([0-9.]+) \|", first_table, re.M)
    check(m and abs(float(m.group(1)) - want) < 0.051, f"majority class on WNLI dev: {m and m.group(1)} == {want:.2f}")
    check("## The pilot" in report and "| WNLI | 0.001 | 1 |" in report, "the report shows the pilot's numbers per epoch")
    cfg = open(os.path.join(work, "pretrain", "BERT-A-d-seed1", "checkpoints", "effective_config.ini")).read()
    check("position_encoding = bert-absolute-untied" in cfg, "BERT-A^d was pre-trained as bert-absolute-untied")
    from scipy.stats import t as student
    a, b = medians["TUPE-R"], medians["BERT-A"]
    va, vb = statistics.variance(a) / 2, statistics.variance(b) / 2
    d = statistics.mean(a) - statistics.mean(b)
    if va + vb > 0:
        df = (va + vb) ** 2 / (va ** 2 + vb ** 2)
        half = student.ppf(0.975, df) * (va + vb) ** 0.5
    else:
        half = 0.0
    m = re.search(r"\| 95% interval \| ([+-][0-9.]+) ± ([0-9.]+) \|", report)
    check(m and abs(float(m.group(1)) - d) < 0.006 and abs(float(m.group(2)) - half) < 0.006,
          f"TUPE-R - BERT-A: {m.group(0) if m else report[-800:]} == {d:+.2f} ± {half:.2f} (Welch, scipy)")
    verdict = next((line for line in report.splitlines() if line.startswith("The paper's sign")), "")
    paper_sign, _, opposite = verdict.partition("; the opposite sign ")
    avg_row = [c.strip() for c in report.split("| 95% interval |")[1].split("\n")[0].split("|") if c.strip()][-1]
    avg_d, avg_half = (float(x) for x in avg_row.split(" ± "))
    check(opposite and ("not on the average" not in paper_sign) == (avg_d - avg_half > 0) and
          ("not on the average" not in opposite) == (avg_d + avg_half < 0) and "Welch's 95% over pre-training seeds" in verdict,
          f"the sentence's verdict on the average matches its interval {avg_row}: "
          f"{verdict!r}")
    check(os.path.isfile(os.path.join(work, "figure5a", "validation.png")) and
          os.path.isfile(os.path.join(work, "figure5c", "glue_curve.png")), "Figures 5a and 5c drawn")
    check(os.path.isfile(os.path.join(work, "pilot", "WNLI", "results.json")), "the pilot ran")
    check_dev_scored_once(work)
    def jobs_run(out):
        return [line for line in out.splitlines() if re.match(r"\[paper [0-9:]+\] \S+: ", line)]

    ran = jobs_run(harness(work, "--store", store))
    check(all(line.split("] ", 1)[1].startswith("report:") for line in ran), f"a second run runs no job but the report: {ran}")
    elsewhere = work + "-elsewhere"
    shutil.rmtree(elsewhere, ignore_errors=True)
    ran = jobs_run(harness(elsewhere, "--store", store))
    check(all(line.split("] ", 1)[1].startswith("report:") for line in ran),
          f"a new work folder with the same store runs no job but the report: {ran}")
    moved = open(os.path.join(elsewhere, "report.md")).read()
    check(moved.split("\n## Figure")[0] == report.split("\n## Figure")[0],
          "... and writes the same Table 1 and TUPE-R - BERT-A interval")
    check(os.path.isfile(os.path.join(elsewhere, "figure5a", "validation.png")), "... and Figure 5a from the stored curves")
    kept = os.path.join(store, "report")
    check(open(os.path.join(kept, "report.md")).read() == moved and
          all(os.path.isfile(os.path.join(kept, f)) for f in ("figure5a/validation.png", "figure5c/glue_curve.png")),
          "the store keeps the newest report and both figures, its links relative")
    check(not os.path.exists(os.path.join(elsewhere, "pretrain", "BERT-A-seed1", "checkpoints", "step_00000020")),
          "... without any checkpoint (the store keeps results, not models)")
    # A report of rows without Figure 5c's (BERT-R): the earlier 5c is gone from WORK and the store.
    harness(elsewhere, "--store", store, "--only", "report", "--rows", "BERT-R")
    one_row = open(os.path.join(elsewhere, "report.md")).read()
    check("Figure 5c" not in one_row and "Figure 5a" in one_row and
          not os.path.exists(os.path.join(elsewhere, "figure5c")) and not os.path.exists(os.path.join(kept, "figure5c")) and
          open(os.path.join(kept, "report.md")).read() == one_row,
          "a report without Figure 5c leaves no earlier 5c behind, in WORK or in the store")
    shutil.rmtree(work + "-nodata", ignore_errors=True)
    env = dict(os.environ, TUPE_SHARED_DATA=os.path.join(work, "no-such-data"))
    p = subprocess.run([sys.executable, PAPER, "--scale", "toy", "--work", work + "-nodata", "--store", ""], env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    check(p.returncode != 0 and p.stdout.strip().count("\n") == 0 and "no-such-data has no glue/" in p.stdout
          and not os.path.exists(work + "-nodata"), f"a missing data folder: one line, nothing written ({p.stdout.strip()!r})")
    # The scale file changed after the run: its finished jobs are not taken as done for it.
    longer = os.path.join(os.path.dirname(work), "toy-40-steps.ini")
    open(longer, "w").write(re.sub(r"^steps = 20$", "steps = 40", open(os.path.join(SRC, "bench", "paper", "toy.ini")).read(),
                                   count=1, flags=re.M))
    p = subprocess.run([sys.executable, PAPER, "--scale", longer, "--work", work, "--store", store], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    check(p.returncode != 0 and p.stdout.strip().count("\n") == 0 and "pretrain/BERT-A-seed1: made with other settings"
          in p.stdout and "optimizer.total_steps: recorded 20, now 40" in p.stdout,
          f"the same work folder under 40 steps instead of 20: refused, naming the run and the setting ({p.stdout.strip()!r})")
    dry = harness(work + "-dry", "--dry-run")
    cmds = [line for line in dry.splitlines() if " pretrain " in line or " finetune " in line]
    check(len([c for c in cmds if " pretrain " in c]) == 8 and not os.path.exists(os.path.join(work + "-dry", "pretrain")),
          f"--dry-run lists the 8 pre-trainings and runs nothing ({len(cmds)} commands)")
    print("all checks passed")


if __name__ == "__main__":
    main(sys.argv[1])
