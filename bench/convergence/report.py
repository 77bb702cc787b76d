"""Report of the convergence benchmark (run.sh): validation MLM loss of tupe and Hugging
Face at each evaluation step, mean and seed band (min..max over seeds), the pass criterion
(after warm-up, tupe's mean lies within HF's seed band or within 0.05 nats of HF's mean), the
training throughput of both, a Markdown table (report.md) and a figure (convergence.png).
"""
import argparse
import glob
import json
import os
import statistics

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def records(path):
    """JSONL records, the last one per step winning (a resumed run may repeat steps)."""
    out = []
    if os.path.exists(path):
        with open(path) as f:
            out = [json.loads(line) for line in f if line.strip()]
    return out


def by_step(recs, key):
    return {r["step"]: r[key] for r in recs if key in r}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", required=True)
    ap.add_argument("--seeds", required=True, help="tupe's seeds")
    ap.add_argument("--hf-seeds", default="", help="Hugging Face's seeds (default: --seeds)")
    ap.add_argument("--warmup", type=int, required=True)
    ap.add_argument("--tolerance", type=float, default=0.05)
    a = ap.parse_args()
    seeds = a.seeds.split()
    hf_seeds = a.hf_seeds.split() or seeds
    tupe = {s: by_step(records(f"{a.work}/tupe-seed{s}/eval.jsonl"), "validation_loss") for s in seeds}
    hf = {s: by_step(records(f"{a.work}/hf-seed{s}/metrics.jsonl"), "validation_loss") for s in hf_seeds}
    steps = sorted(set.intersection(*[set(v) for v in list(tupe.values()) + list(hf.values())]))
    if not steps:
        raise SystemExit(f"{a.work}: no evaluation step common to every run yet")

    def speed(recs):
        v = [r["tokens_per_s"] for r in recs if "tokens_per_s" in r]
        return statistics.median(v) if v else float("nan")

    tupe_tps = {s: speed(sum((records(p) for p in glob.glob(f"{a.work}/tupe-seed{s}/checkpoints/metrics/rank_0.jsonl")
                                                             + glob.glob(f"{a.work}/tupe-seed{s}/checkpoints/rank_0.jsonl")), []))
                for s in seeds}
    hf_tps = {s: speed(records(f"{a.work}/hf-seed{s}/metrics.jsonl")) for s in hf_seeds}

    lines = ["| step | " + " | ".join(f"HF seed {s}" for s in hf_seeds) + " | HF mean | HF band | "
             + " | ".join(f"tupe seed {s}" for s in seeds) + " | tupe mean | tupe band | tupe - HF mean | within? |",
             "|---" * (len(hf_seeds) + len(seeds) + 7) + "|"]
    all_ok = True
    for st in steps:
        h = [hf[s][st] for s in hf_seeds]
        t = [tupe[s][st] for s in seeds]
        hm, tm = statistics.mean(h), statistics.mean(t)
        inside = min(h) <= tm <= max(h) or abs(tm - hm) <= a.tolerance
        judged = st > a.warmup
        if judged:
            all_ok &= inside
        verdict = ("yes" if inside else "**no**") if judged else "(warm-up)"
        lines.append(f"| {st} | " + " | ".join(f"{x:.4f}" for x in h) + f" | {hm:.4f} | {min(h):.4f}..{max(h):.4f} | "
                     + " | ".join(f"{x:.4f}" for x in t) + f" | {tm:.4f} | {min(t):.4f}..{max(t):.4f} | {tm - hm:+.4f} | {verdict} |")
    lines.append("")
    lines.append(f"Pass criterion (every evaluation after warm-up step {a.warmup}: tupe's mean within HF's seed band "
                 f"or within {a.tolerance} nats of HF's mean): **{'PASS' if all_ok else 'FAIL'}**.")
    lines.append("")
    lines.append("Training throughput (median over log windows, padded tokens/s; the runs need not have shared one "
                 "machine load, so this is no speed comparison: bench/pretrain_bench.sh is): "
                 + ", ".join(f"tupe seed {s} {tupe_tps[s]:.0f}" for s in seeds) + "; "
                 + ", ".join(f"HF seed {s} {hf_tps[s]:.0f}" for s in hf_seeds) + ".")
    with open(f"{a.work}/report.md", "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))

    fig, ax = plt.subplots(figsize=(7, 4.2))
    for name, runs, color in (("HF BertForMaskedLM", hf, "tab:orange"), ("tupe BERT-A", tupe, "tab:blue")):
        mean = [statistics.mean(runs[s][st] for s in runs) for st in steps]
        lo = [min(runs[s][st] for s in runs) for st in steps]
        hi = [max(runs[s][st] for s in runs) for st in steps]
        ax.plot(steps, mean, marker="o", color=color, label=f"{name} (mean of {len(runs)} seeds)")
        ax.fill_between(steps, lo, hi, color=color, alpha=0.25)
    ax.axvline(a.warmup, color="grey", linestyle=":", label="end of warm-up")
    ax.set_xlabel("optimizer step (batch 32 x 128 tokens)")
    ax.set_ylabel("validation MLM loss (nats)")
    ax.set_title("mixed-english, BERT-tiny size: tupe vs transformers")
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(f"{a.work}/convergence.png", dpi=120)


if __name__ == "__main__":
    main()
