"""Report of the paper in miniature (bench/paper_mini/run.sh), in the layout of Table 1 of Ke,
He and Liu (ICLR 2021): per pre-trained model the final validation MLM loss, the steps it
takes to reach BERT-A's final validation loss (the paper's "about 30% of the steps"), and the
GLUE dev score per task (the median over fine-tuning seeds at the best learning rate, x100)
with their average; then the TUPE-R vs BERT-A differences against the spread of their
pre-training seeds. The validation curves, final losses and steps to reach come from
`tupe analyze --run` (tools/analyze/compare.h) into WORK/compare/; its figure (every model's
mean validation curve with its seed band) is copied to WORK/validation.png. Writes WORK/report.md.
"""
import argparse
import glob
import json
import os
import re
import shutil
import statistics
import subprocess

ORDER = ["BERT-A", "BERT-R", "TUPE-A", "TUPE-R", "TUPE-R-tie-cls"]


def compare(tupe: str, work: str, runs: dict, variants: list) -> dict:
    """Runs `tupe analyze --run` over every pre-training run (BERT-A the reference) into
    WORK/compare and returns {(variant, seed): that run's record of compare.json}."""
    out = os.path.join(work, "compare")
    args = [tupe, "analyze", "--reference", "BERT-A", "--output", out]
    order = []
    for v in variants:
        for s in sorted(runs[v]):
            args += ["--run", f"{v}={os.path.join(runs[v][s], 'checkpoints')}"]
            order.append((v, s))
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL)
    with open(os.path.join(out, "compare.json")) as f:
        info = json.load(f)
    records = {}
    for m in info["models"]:
        seeds = [s for v, s in order if v == m["name"]]
        for s, r in zip(seeds, m["runs"]):
            records[(m["name"], s)] = r
    shutil.copyfile(os.path.join(out, "validation.png"), os.path.join(work, "validation.png"))
    return records


def glue_score(work: str, model: str, task: str):
    """(primary metric name, the reported dev value x100) of one fine-tuning, or None."""
    path = os.path.join(work, "glue", model, task, "results.json")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        doc = json.load(f)
    t = doc["tasks"][0]
    split = next(iter(t["reported"].values()))
    return t["primary_metric"], 100.0 * split[t["primary_metric"]]


def fmt(v, digits=2):
    return "-" if v is None else f"{v:.{digits}f}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", required=True)
    ap.add_argument("--tasks", required=True)
    ap.add_argument("--tupe", required=True, help="the tupe executable (its `analyze --run` draws the curves)")
    a = ap.parse_args()
    tasks = a.tasks.split()
    runs = {}
    for d in sorted(glob.glob(os.path.join(a.work, "pretrain", "*-seed*"))):
        m = re.match(r"(.+)-seed(\d+)$", os.path.basename(d))
        runs.setdefault(m.group(1), {})[int(m.group(2))] = d
    variants = [v for v in ORDER if v in runs]
    if "BERT-A" not in variants:
        raise SystemExit(f"{a.work}: BERT-A has not been pre-trained yet")
    rec = compare(a.tupe, a.work, runs, variants)
    budget = max(r["final_step"] for r in rec.values())

    lines = [f"Pre-training: {budget} steps of batch 32 x 128 tokens on mixed-english; validation MLM loss on "
             "mixed-english validation.txt (all of it, tupe's fixed validation masks). GLUE dev: median over "
             "fine-tuning seeds at the best learning rate (bench/paper_mini/glue.ini), x100; CoLA Matthews corr., "
             "STS-B Pearson, the others accuracy.", "",
             "| model | seed | steps | final val. loss | steps to BERT-A's final loss | "
             + " | ".join(tasks) + " | avg |", "|---" * (5 + len(tasks) + 1) + "|"]
    table = {}
    for v in variants:
        for s in sorted(runs[v]):
            r = rec[(v, s)]
            reach = r["steps_to_reach"]
            scores = [glue_score(a.work, f"{v}-seed{s}", t) for t in tasks]
            vals = [x[1] if x else None for x in scores]
            avg = statistics.mean(vals) if vals and all(x is not None for x in vals) else None
            table[(v, s)] = (r["final_validation_loss"], reach, vals, avg)
            reach_text = "-" if reach is None else f"{reach:.0f} ({100 * reach / r['final_step']:.0f}%)"
            lines.append(f"| {v} | {s} | {r['final_step']} | {fmt(r['final_validation_loss'], 4)} | {reach_text} | "
                         + " | ".join(fmt(x) for x in vals) + f" | {fmt(avg)} |")
    lines.append("")

    # TUPE-R against BERT-A, with the spread of each one's seeds.
    def summary(v):
        rows = [table[(v, s)] for s in sorted(runs.get(v, {}))]
        loss = [r[0] for r in rows if r[0] is not None]
        avg = [r[3] for r in rows if r[3] is not None]
        return loss, avg
    if "TUPE-R" in runs:
        bl, ba = summary("BERT-A")
        tl, ta = summary("TUPE-R")
        lines.append("TUPE-R vs BERT-A (means over pre-training seeds; spread = max - min over seeds):")
        lines.append("")
        lines.append("| measure | BERT-A | spread | TUPE-R | spread | TUPE-R - BERT-A | exceeds both spreads? "
                     "| every TUPE-R seed better than every BERT-A seed? |")
        lines.append("|---|---|---|---|---|---|---|---|")
        for name, b, t, lower_better in (("final validation loss", bl, tl, True), ("GLUE average", ba, ta, False)):
            if len(b) and len(t):
                d = statistics.mean(t) - statistics.mean(b)
                sb, st = max(b) - min(b), max(t) - min(t)
                verdict = ("yes" if abs(d) > max(sb, st) else "no") if min(len(b), len(t)) >= 2 else "n/a (one seed)"
                separated = max(t) < min(b) if lower_better else min(t) > max(b)
                lines.append(f"| {name} | {statistics.mean(b):.4f} | {sb:.4f} | {statistics.mean(t):.4f} | {st:.4f} | "
                             f"{d:+.4f} | {verdict} | {'yes' if separated else 'no'} |")
        lines.append("")
    with open(os.path.join(a.work, "report.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))

if __name__ == "__main__":
    main()
