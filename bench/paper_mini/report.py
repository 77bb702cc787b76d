"""Report of the paper in miniature (bench/paper_mini/run.sh), in the layout of Table 1 of Ke,
He and Liu (ICLR 2021): per pre-trained model the final validation MLM loss, the steps it
takes to reach BERT-A's final validation loss (the paper's "about 30% of the steps"), and the
GLUE dev score per task (the median over fine-tuning seeds at the best learning rate, x100)
with their average; then the TUPE-R vs BERT-A differences against the spread of their
pre-training seeds. Writes WORK/report.md and WORK/validation.png (every model's
validation curve in one figure).
"""
import argparse
import glob
import json
import os
import re
import statistics

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ORDER = ["BERT-A", "BERT-R", "TUPE-A", "TUPE-R", "TUPE-R-tie-cls"]


def validation_curve(run: str) -> dict:
    """{step: validation loss} of a pre-training run (the last record per step wins)."""
    curve = {}
    for path in glob.glob(os.path.join(run, "checkpoints", "metrics", "rank_*.jsonl"))[:1]:
        with open(path) as f:
            for line in f:
                r = json.loads(line)
                if "validation_loss" in r:
                    curve[r["step"]] = r["validation_loss"]
    return curve


def steps_to_reach(curve: dict, target: float):
    """First step at which the curve reaches `target`, interpolated linearly between
    evaluations; None if it never does."""
    pts = sorted(curve.items())
    for k, (s, v) in enumerate(pts):
        if v <= target:
            if k == 0:
                return float(s)
            s0, v0 = pts[k - 1]
            return s0 + (s - s0) * (v0 - target) / (v0 - v)
    return None


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
    a = ap.parse_args()
    tasks = a.tasks.split()
    runs = {}
    for d in sorted(glob.glob(os.path.join(a.work, "pretrain", "*-seed*"))):
        m = re.match(r"(.+)-seed(\d+)$", os.path.basename(d))
        runs.setdefault(m.group(1), {})[int(m.group(2))] = d
    variants = [v for v in ORDER if v in runs]
    curves = {v: {s: validation_curve(d) for s, d in runs[v].items()} for v in variants}
    final = {v: {s: c[max(c)] for s, c in curves[v].items() if c} for v in variants}
    budget = max((max(c) for v in variants for c in curves[v].values() if c), default=0)
    if "BERT-A" not in final or not final["BERT-A"]:
        raise SystemExit(f"{a.work}: BERT-A has no validation loss yet")
    target = statistics.mean(final["BERT-A"].values())

    lines = [f"Pre-training: {budget} steps of batch 32 x 128 tokens on mixed-english; validation MLM loss on "
             "mixed-english validation.txt (all of it, tupe's fixed validation masks). GLUE dev: median over "
             "fine-tuning seeds at the best learning rate (bench/paper_mini/glue.ini), x100; CoLA Matthews corr., "
             "STS-B Pearson, the others accuracy.", "",
             "| model | seed | steps | final val. loss | steps to BERT-A's final loss | "
             + " | ".join(tasks) + " | avg |", "|---" * (5 + len(tasks) + 1) + "|"]
    table = {}
    for v in variants:
        for s in sorted(runs[v]):
            c = curves[v][s]
            reach = steps_to_reach(c, target) if c else None
            scores = [glue_score(a.work, f"{v}-seed{s}", t) for t in tasks]
            vals = [x[1] if x else None for x in scores]
            avg = statistics.mean(vals) if vals and all(x is not None for x in vals) else None
            table[(v, s)] = (final[v].get(s), reach, vals, avg)
            reach_text = "-" if reach is None else f"{reach:.0f} ({100 * reach / max(c):.0f}%)"
            lines.append(f"| {v} | {s} | {max(c) if c else '-'} | {fmt(final[v].get(s), 4)} | {reach_text} | "
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
        lines.append("| measure | BERT-A | spread | TUPE-R | spread | TUPE-R - BERT-A | exceeds both spreads? |")
        lines.append("|---|---|---|---|---|---|---|")
        for name, b, t, lower_better in (("final validation loss", bl, tl, True), ("GLUE average", ba, ta, False)):
            if len(b) and len(t):
                d = statistics.mean(t) - statistics.mean(b)
                sb, st = max(b) - min(b), max(t) - min(t)
                verdict = ("yes" if abs(d) > max(sb, st) else "no") if min(len(b), len(t)) >= 2 else "n/a (one seed)"
                lines.append(f"| {name} | {statistics.mean(b):.4f} | {sb:.4f} | {statistics.mean(t):.4f} | {st:.4f} | "
                             f"{d:+.4f} | {verdict} |")
        lines.append("")
    with open(os.path.join(a.work, "report.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))

    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    colors = dict(zip(ORDER, ["tab:orange", "tab:red", "tab:green", "tab:blue", "tab:purple"]))
    for v in variants:
        for k, (s, c) in enumerate(sorted(curves[v].items())):
            if not c:
                continue
            xs = sorted(c)
            ax.plot(xs, [c[x] for x in xs], color=colors[v], linestyle="-" if k == 0 else "--",
                    label=f"{v} seed {s}")
    ax.axhline(target, color="grey", linestyle=":", label="BERT-A final (mean)")
    ax.set_xlabel("optimizer step (batch 32 x 128 tokens)")
    ax.set_ylabel("validation MLM loss (nats)")
    ax.set_title("TUPE vs BERT positional encodings, BERT-tiny on mixed-english")
    ax.set_ylim(top=min(8.0, ax.get_ylim()[1]))
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(os.path.join(a.work, "validation.png"), dpi=120)


if __name__ == "__main__":
    main()
