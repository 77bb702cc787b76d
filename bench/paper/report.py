"""The report of a Table 1 run (paper.py): WORK/report.md in Table 1's layout, Figure 5a
(validation MLM loss against steps, every pre-trained row; `tupe analyze --run`) and Figure 5c
(the GLUE average against pre-training steps; `tupe analyze --glue`), WORK/report.json.

Usage: python bench/paper/report.py --scale mini|base|toy|FILE --work DIR
Each entry: the primary dev metric x100 (CoLA Matthews corr., STS-B Pearson, others accuracy)
at the best LR, the median over the fine-tuning seeds, with their range; a row pre-trained with
several seeds shows the mean of its seeds' medians and their range. TUPE-R - BERT-A per task
and on the average comes with a 95% interval over pre-training seeds (Welch's t; needs at least
2 seeds of each). Missing results show as "-" (a report can be drawn mid-run). The validation
losses come in measures that do not depend on where a reference stops: every row at matched
steps (10%, 30%, 50%, 100%) and the steps to fixed losses; the paper's 30% claim is set in its own
measure, the GLUE average of TUPE-R^mid (30% of the steps) against BERT-A's at 100%.
With [paper] lr_grid: the grid (row x LR -> validation loss at the grid runs' end, the chosen LR
marked) and each row's pre-training LR in Table 1; rows still waiting for their grid show "-".
"""
import argparse
import collections
import csv
import json
import math
import os
import shutil
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from plan import load_scale  # noqa: E402
from scale_check import lr_name  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COLUMNS = {"CoLA": "CoLA", "SST-2": "SST", "MRPC": "MRPC", "STS-B": "STS", "RTE": "RTE", "WNLI": "WNLI",
           "QNLI": "QNLI", "QQP": "QQP", "MNLI": "MNLI"}


def task_result(path):
    """(median at the best LR, [each fine-tuning seed's score at it]) x100, or None."""
    f = os.path.join(path, "results.json")
    if not os.path.exists(f):
        return None
    t = json.load(open(f))["tasks"][0]
    best = t["best_lr"]
    median = next(s["median_score"] for s in t["by_lr"] if s["lr"] == best)
    seeds = [r["score"] * 100 for r in t["runs"] if r["lr"] == best]
    return median * 100, seeds


LABEL_COLUMN = {"SST-2": "label", "MRPC": "Quality", "RTE": "label", "WNLI": "label", "QNLI": "label",
                "MNLI": "gold_label", "QQP": "is_duplicate"}


def majority(glue_dir, task):
    """The dev score x100 of always answering the most frequent dev label: accuracy, or 0 for
    CoLA's Matthews correlation and STS-B's Pearson (a constant has no correlation)."""
    if task in ("CoLA", "STS-B"):
        return 0.0
    name = "dev_matched.tsv" if task == "MNLI" else "dev.tsv"
    path = os.path.join(glue_dir, task, name)
    if task not in LABEL_COLUMN or not os.path.exists(path):
        return None
    with open(path, encoding="utf-8-sig", newline="") as f:
        rows = list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    counts = collections.Counter(r[LABEL_COLUMN[task]] for r in rows)
    return 100 * max(counts.values()) / sum(counts.values())


def pilot_lines(s):
    """The pilot's numbers: per task and LR, the score x100 after each epoch (the best in bold)
    on the split that chose: the selection split held out of train ([finetune]
    selection_fraction), else the dev set."""
    out, on = [], set()
    for t in s.tasks:
        f = os.path.join(s.work, "pilot", t, "results.json")
        if not os.path.exists(f):
            continue
        task = json.load(open(f))["tasks"][0]
        metric = task["primary_metric"]
        chosen_on = task.get("chosen_on", "dev")
        on.add(chosen_on)
        for r in task["runs"]:
            scores = [100 * (e["selection"][metric] if chosen_on == "selection" else e["dev"]["dev"][metric])
                      for e in r["epochs"]]
            best = max(range(len(scores)), key=lambda i: scores[i])
            cells = [f"**{v:.1f}**" if i == best else f"{v:.1f}" for i, v in enumerate(scores)]
            out.append(f"| {t} | {r['lr']:g} | {r['seed']} | " + " | ".join(cells) + " |")
    if not out:
        return []
    epochs = max(line.count("|") - 4 for line in out)
    split = " and ".join("the selection split" if o == "selection" else "dev" for o in sorted(on))
    return [f"## The pilot (BERT-A, first seed): {split} x100 after each epoch", "",
            "| task | LR | seed | " + " | ".join(f"epoch {i + 1}" for i in range(epochs)) + " |",
            "|---" * (epochs + 3) + "|"] + out + [""]


def welch_interval(a, b, level=0.975):
    """mean(a) - mean(b) and the half-width of its 95% interval (Welch), or None."""
    if len(a) < 2 or len(b) < 2:
        return None
    from scipy.stats import t as student
    va, vb = statistics.variance(a) / len(a), statistics.variance(b) / len(b)
    d = statistics.mean(a) - statistics.mean(b)
    if va + vb == 0:
        return d, 0.0
    df = (va + vb) ** 2 / (va ** 2 / (len(a) - 1) + vb ** 2 / (len(b) - 1))
    return d, student.ppf(level, df) * math.sqrt(va + vb)


def fmt(v, digits=1):
    return "-" if v is None else f"{v:.{digits}f}"


def collect(s):
    """row -> seed -> task -> (median, seeds); row -> seed -> average over all tasks (or None)."""
    table, avg = {}, {}
    for row in s.rows.values():
        step = s.mid_step if row.mid_of else s.steps
        for seed in s.seeds_of(row.pretrained_row):
            per = {t: task_result(s.glue_out(row.pretrained_row, seed, step, t)) if s.ready(row.pretrained_row) else None
                   for t in s.tasks}
            table.setdefault(row.name, {})[seed] = per
            vals = [v[0] for v in per.values() if v]
            avg.setdefault(row.name, {})[seed] = statistics.mean(vals) if len(vals) == len(s.tasks) else None
    return table, avg


def entry(per_seed, task):
    vals = [per_seed[seed][task] for seed in per_seed if per_seed[seed][task]]
    if not vals:
        return "-", None
    if len(vals) == 1:  # one pre-training seed (so far): the fine-tuning seeds' range
        m, seeds = vals[0]
        of = "" if len(per_seed) == 1 else f" (1 of {len(per_seed)})"
        return f"{m:.1f} [{min(seeds):.1f}, {max(seeds):.1f}]{of}", m
    meds = [v[0] for v in vals]
    return f"{statistics.mean(meds):.1f} [{min(meds):.1f}, {max(meds):.1f}] ({len(meds)})", statistics.mean(meds)


def figure_5a(s, out):
    """Figure 5a into WORK/figure5a (what an earlier report drew there is removed first, so a
    figure not drawn now is not left behind); its folder, or None when it is not drawn."""
    dest = os.path.join(s.work, "figure5a")
    shutil.rmtree(dest, ignore_errors=True)
    runs = []
    for row in s.rows.values():
        if row.mid_of or not s.ready(row.name):
            continue
        for seed in s.seeds_of(row.name):
            d = os.path.join(s.run_dir(row.name, seed), "checkpoints")
            if os.path.exists(os.path.join(d, "metrics", "rank_0.jsonl")):
                runs += ["--run", f"{row.name}={d}"]
    if not runs:
        return None
    names = [r.split("=")[0] for r in runs[1::2]]
    ref = "BERT-A" if "BERT-A" in names else names[0]
    p = subprocess.run([s.tupe, "analyze", "--reference", ref, "--output", dest] + runs,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if p.returncode != 0:
        out.append(f"(Figure 5a failed: {p.stdout.strip().splitlines()[-1:]})")
        return None
    return dest


def figure_5c(s, out):
    """Figure 5c into WORK/figure5c, drawn afresh as figure_5a is; its folder, or None."""
    dest = os.path.join(s.work, "figure5c")
    shutil.rmtree(dest, ignore_errors=True)
    args = []
    for r in [r for r in s.curve_rows if s.ready(r)]:
        seed = s.seeds[0]
        for step in s.curve_steps:
            for t in s.tasks:
                d = s.glue_out(r, seed, step, t)
                if os.path.exists(os.path.join(d, "results.json")):
                    args += ["--glue", f"{r}={d}"]
    if not args:
        return None
    p = subprocess.run([s.tupe, "analyze", "--output", dest] + args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True)
    if p.returncode != 0:
        out.append(f"(Figure 5c failed: {' '.join(p.stdout.strip().splitlines()[-1:])})")
        return None
    return dest


def validation_curve(s, row, seed):
    """{step: validation MLM loss} of a row's pre-training (its metrics in the store or WORK)."""
    path = os.path.join(s.run_dir(row, seed), "checkpoints", "metrics", "rank_0.jsonl")
    curve = {}
    if os.path.exists(path):
        for line in open(path):
            r = json.loads(line)
            if isinstance(r.get("validation_loss"), (int, float)):
                curve[r["step"]] = r["validation_loss"]
    return curve


MATCHED_FRACTIONS = (0.1, 0.3, 0.5, 1.0)
FIXED_LOSSES = (5.5, 5.0, 4.5)


def loss_lines(s, data):
    """The validation losses in measures that do not depend on where a reference run stops:
    every row at matched steps (the evaluation nearest each fraction of the steps), and the
    steps each row needs to reach fixed losses (its first evaluation at or below)."""
    rows = [r for r in s.rows.values() if not r.mid_of and s.ready(r.name)]
    curves = {r.name: [c for c in (validation_curve(s, r.name, seed) for seed in s.seeds_of(r.name)) if c] for r in rows}
    steps = sorted({k for cs in curves.values() for c in cs for k in c})
    if not steps:
        return []
    matched = [min(steps, key=lambda k: (abs(k - f * s.steps), k)) for f in MATCHED_FRACTIONS]
    md = ["## Validation MLM loss at matched steps", "",
          "The evaluation nearest 10%, 30%, 50% and 100% of the steps; the mean over pre-training seeds [their range] "
          "(seeds).", "", "| row | " + " | ".join(f"step {k} ({k / s.steps:.0%})" for k in matched) + " |",
          "|---" * (len(matched) + 1) + "|"]
    data["matched_steps"] = {}
    for r in rows:
        cells, vals_row = [], {}
        for k in matched:
            v = [c[k] for c in curves[r.name] if k in c]
            vals_row[k] = v
            if not v:
                cells.append("-")
            elif len(v) == 1:
                cells.append(f"{v[0]:.3f}")
            else:
                cells.append(f"{statistics.mean(v):.3f} [{min(v):.3f}, {max(v):.3f}] ({len(v)})")
        md.append(f"| {r.name} | " + " | ".join(cells) + " |")
        data["matched_steps"][r.name] = vals_row
    md += ["", "## Steps to fixed validation losses", "",
           "The first evaluation at or below each loss, per pre-training seed (\"-\": not reached in "
           f"{s.steps} steps).", "", "| row | " + " | ".join(f"loss {v}" for v in FIXED_LOSSES) + " |",
           "|---" * (len(FIXED_LOSSES) + 1) + "|"]
    data["steps_to_loss"] = {}
    for r in rows:
        cells, per = [], {}
        for target in FIXED_LOSSES:
            reached = [min((k for k, v in c.items() if v <= target), default=None) for c in curves[r.name]]
            per[target] = reached
            cells.append(", ".join("-" if k is None else str(k) for k in reached) or "-")
        md.append(f"| {r.name} | " + " | ".join(cells) + " |")
        data["steps_to_loss"][r.name] = per
    md.append("")
    return md


def grid_lines(s, data):
    """The pre-training LR grid: each row's validation loss at the grid runs' end per LR, the
    chosen LR (the lowest loss, ties to the smaller LR) in bold; "-" where a run is not done."""
    if not s.lr_grid:
        return []
    lrs = [lr_name(lr) for lr in s.lr_grid]
    md = ["## The pre-training LR grid", "",
          f"Each pre-trained row at each LR, seed {s.seeds[0]}, the full schedule ({s.steps} steps, "
          f"{s.paper['warmup_steps']} of warm-up) stopped at step {s.grid_step}: the validation MLM loss there. "
          "Each row's table pre-trainings run at its LR in bold, the lowest (ties: the smaller LR); "
          f"its seed {s.seeds[0]} continues that grid run to step {s.steps}.", "",
          "| row | " + " | ".join(f"LR {n}" for n in lrs) + " | chosen |", "|---" * (len(lrs) + 2) + "|"]
    data["lr_grid"] = {"step": s.grid_step, "losses": {}, "chosen": {}}
    for r, losses in s.grid_losses.items():
        best = s.best_lr.get(r)
        cells = ["-" if v is None else (f"**{v:.4f}**" if lr == best else f"{v:.4f}") for lr, v in losses.items()]
        md.append(f"| {r} | " + " | ".join(cells) + f" | {lr_name(best) if best else '(waits)'} |")
        data["lr_grid"]["losses"][r] = {lr_name(lr): v for lr, v in losses.items()}
        data["lr_grid"]["chosen"][r] = best
    md.append("")
    return md


def thirty_percent_lines(s, avg):
    """The paper's claim in its own measure: TUPE at 30% of the steps against the baselines at
    100% on the GLUE average (Sec. 4.2, Figure 5c). Here: TUPE-R^mid (the mid checkpoint, at
    mid_fraction of the steps) against BERT-A, Welch's 95% over pre-training seeds."""
    mid = next((r.name for r in s.rows.values() if r.mid_of == "TUPE-R"), None)
    if not mid or "BERT-A" not in avg or mid not in avg:
        return []
    a_ = [v for v in avg[mid].values() if v is not None]
    b_ = [v for v in avg["BERT-A"].values() if v is not None]
    if not a_ or not b_:
        return []
    w = welch_interval(a_, b_)
    diff = statistics.mean(a_) - statistics.mean(b_)
    verdict = ("beyond noise in the paper's direction" if w and w[0] - w[1] > 0 else
               "beyond noise against it" if w and w[0] + w[1] < 0 else "not beyond noise" if w else "no interval (< 2 seeds)")
    return ["## The paper's 30% claim, in its own measure", "",
            f"The paper: TUPE reaches a better GLUE average than the baselines with about 30% of their pre-training steps. "
            f"Here {mid} (TUPE-R at {s.mid_step} of {s.steps} steps) averages {statistics.mean(a_):.2f} "
            f"({len(a_)} seed(s)) and BERT-A at all {s.steps} steps {statistics.mean(b_):.2f} ({len(b_)}): "
            f"{mid} - BERT-A {diff:+.2f}" + (f" ± {w[1]:.2f}" if w else "") + f", {verdict}.", ""]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scale", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--rows")
    a = ap.parse_args()
    s = load_scale(a.scale, a.work, a.rows)
    table, avg = collect(s)
    md = [f"# Table 1 at scale `{s.name}`", "",
          f"Pre-training: {s.steps} steps per row, seeds {s.seeds} for {', '.join(s.all_seeds_rows) or 'no row'}, "
          f"{s.seeds[0]} for the others; ^mid rows at step {s.mid_step}. Fine-tuning: the [finetune] protocol of "
          f"{os.path.relpath(s.path, REPO) if s.path.startswith(REPO + os.sep) else s.path}. Entries: dev x100, the median over fine-tuning seeds at the best LR [their range]; "
          "rows with several pre-training seeds: the mean of the seeds' medians [their range] (seeds)."
          + (" Each row pre-trained at its own LR, chosen by the LR grid below." if s.lr_grid else ""), ""]
    lr_col = bool(s.lr_grid)  # each row's pre-training LR, the grid's choice
    md.append("| row | " + ("pre-training LR | " if lr_col else "") + " | ".join(COLUMNS.get(t, t) for t in s.tasks)
              + " | avg |")
    md.append("|---" * (len(s.tasks) + 2 + lr_col) + "|")
    data = {"scale": s.name, "rows": {}}
    for row in s.rows:
        pre = s.rows[row].pretrained_row
        lr_cell = (lr_name(s.best_lr[pre]) if pre in s.best_lr else "(grid)") + " | " if lr_col else ""
        cells, means = [], []
        for t in s.tasks:
            text, m = entry(table[row], t)
            cells.append(text)
            means.append(m)
        seed_avgs = [v for v in avg[row].values() if v is not None]
        if not seed_avgs:
            a_text = "-"
        elif len(seed_avgs) == 1:  # one pre-training seed (so far)
            a_text = f"{seed_avgs[0]:.2f}" + ("" if len(avg[row]) == 1 else f" (1 of {len(avg[row])})")
        else:
            a_text = (f"{statistics.mean(seed_avgs):.2f} [{min(seed_avgs):.2f}, {max(seed_avgs):.2f}] "
                      f"({len(seed_avgs)})")
        md.append(f"| {row} | {lr_cell}" + " | ".join(cells) + f" | {a_text} |")
        data["rows"][row] = {"tasks": dict(zip(s.tasks, means)), "average_per_seed": avg[row]}
        if lr_col:
            data["rows"][row]["pretrain_lr"] = s.best_lr.get(pre)
    base = [majority(s.glue_dir, t) for t in s.tasks]
    md.append("| majority class | " + ("| " if lr_col else "") + " | ".join(fmt(v) for v in base) + " | "
              + (f"{statistics.mean(base):.2f}" if None not in base else "-") + " |")
    md.append("")
    if "TUPE-R" in table and "BERT-A" in table:
        md += ["## TUPE-R - BERT-A", "", "| | " + " | ".join(s.tasks) + " | avg |", "|---" * (len(s.tasks) + 2) + "|"]
        cells, beyond, below, data["difference"] = [], [], [], {}
        for t in s.tasks + ["avg"]:
            if t == "avg":
                a_ = [v for v in avg["TUPE-R"].values() if v is not None]
                b_ = [v for v in avg["BERT-A"].values() if v is not None]
            else:
                a_ = [v[t][0] for v in table["TUPE-R"].values() if v[t]]
                b_ = [v[t][0] for v in table["BERT-A"].values() if v[t]]
            w = welch_interval(a_, b_)
            if w is None:
                d = statistics.mean(a_) - statistics.mean(b_) if a_ and b_ else None
                cells.append(fmt(d, 2) + " (no interval: < 2 seeds)" if d is not None else "-")
            else:
                cells.append(f"{w[0]:+.2f} ± {w[1]:.2f}")
                if w[0] - w[1] > 0:
                    beyond.append(t)
                elif w[0] + w[1] < 0:
                    below.append(t)
            data["difference"][t] = w
        md.append("| 95% interval | " + " | ".join(cells) + " |")
        md.append("")
        if any(data["difference"].values()):
            def where(names):  # "RTE, CoLA but not on the average", "no task and not on the average", ...
                tasks = ", ".join(t for t in names if t != "avg") or "no task"
                on_avg = "avg" in names
                joiner = "and" if (tasks == "no task") != on_avg else "but"
                return f"on {tasks} {joiner} {'' if on_avg else 'not '}on the average"
            md.append(f"The paper's sign (TUPE-R above BERT-A) shows beyond noise {where(beyond)}; the opposite sign "
                      f"{where(below)}. Each interval is Welch's 95% over pre-training seeds, one per column"
                      + (f", not corrected for comparing {len(s.tasks)} tasks: with no true difference anywhere, at"
                         f" least one task would show beyond noise by chance {1 - 0.95 ** len(s.tasks):.0%} of the"
                         " time; the average column is a single comparison." if len(s.tasks) > 1 else "."))
        else:
            md.append("Not enough seeds yet for an interval.")
        md.append("")
    md += grid_lines(s, data)
    md += thirty_percent_lines(s, avg)
    md += loss_lines(s, data)
    md += pilot_lines(s)
    notes = []
    fa = figure_5a(s, notes)
    fc = figure_5c(s, notes)
    if fa:
        md += ["## Figure 5a: validation MLM loss against steps", "", f"![5a]({os.path.relpath(fa, s.work)}/validation.png)",
               "", open(os.path.join(fa, "compare.md")).read() if os.path.exists(os.path.join(fa, "compare.md")) else "", ""]
    if fc:
        md += ["## Figure 5c: GLUE average against pre-training steps", "",
               f"![5c]({os.path.relpath(fc, s.work)}/glue_curve.png)", "",
               open(os.path.join(fc, "glue_curve.md")).read() if os.path.exists(os.path.join(fc, "glue_curve.md")) else ""]
    md += notes
    with open(os.path.join(s.work, "report.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    with open(os.path.join(s.work, "report.json"), "w") as f:
        json.dump(data, f, indent=2, default=str)
    print(f"wrote {os.path.join(s.work, 'report.md')}")


if __name__ == "__main__":
    main()
