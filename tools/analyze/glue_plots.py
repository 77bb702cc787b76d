"""The figure of `tupe analyze --glue NAME=DIR ...` (tools/analyze/glue_curve.h lists the inputs).

Usage: glue_plots.py OUT   (OUT holds glue_curve.json)

Writes OUT/glue_curve.png: per NAME the GLUE average (x100) against the pre-training step of
the checkpoint fine-tuned, points joined by lines; points averaged over fewer tasks are hollow.
800 x 500 pixels. Exits non-zero when matplotlib is missing.
"""
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    out = sys.argv[1]
    info = json.load(open(os.path.join(out, "glue_curve.json")))
    fig, ax = plt.subplots(figsize=(8, 5))
    for m in info["models"]:
        pts = m["points"]
        (line,) = ax.plot([p["step"] for p in pts], [p["average"] for p in pts], marker="o", label=m["name"])
        partial = [p for p in pts if p["partial"]]
        if partial:
            ax.scatter([p["step"] for p in partial], [p["average"] for p in partial], s=80, facecolors="white",
                       edgecolors=line.get_color(), zorder=3)
    ax.set_xlabel("pre-training step of the fine-tuned checkpoint")
    ax.set_ylabel("GLUE dev average (x100)")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(out, "glue_curve.png"), dpi=100)


if __name__ == "__main__":
    main()
