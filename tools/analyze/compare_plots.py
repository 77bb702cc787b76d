"""The figure of `tupe analyze --run NAME=DIR ...` (tools/analyze/compare.h lists the inputs).

Usage: compare_plots.py OUT   (OUT holds compare.json)

Writes OUT/validation.png: per model the mean validation MLM loss over its seeds against the
step, the seeds' min..max as a band (models with one seed: the line alone), and the target
(the reference model's final validation loss) as a dashed line. The pixel size is figsize x
dpi: 800 x 500. Exits non-zero when matplotlib is missing.
"""
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    out = sys.argv[1]
    info = json.load(open(os.path.join(out, "compare.json")))
    fig, ax = plt.subplots(figsize=(8, 5))
    for m in info["models"]:
        rows = m["curve"]
        steps = [r[0] for r in rows]
        label = m["name"] + (f" ({m['seeds']} seeds)" if m["seeds"] > 1 else "")
        (line,) = ax.plot(steps, [r[1] for r in rows], marker="o", markersize=3, label=label)
        if m["seeds"] > 1:
            ax.fill_between(steps, [r[2] for r in rows], [r[3] for r in rows], color=line.get_color(), alpha=0.25)
    ax.axhline(info["target"], color="gray", linestyle="--", linewidth=1,
               label=f"{info['reference']} final ({info['target']:.3f})")
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("validation MLM loss (nats per masked token)")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(out, "validation.png"), dpi=100)


if __name__ == "__main__":
    main()
