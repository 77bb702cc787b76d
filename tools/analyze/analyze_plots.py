"""Plots and probes of `tupe analyze` (tools/analyze/analysis.h lists the inputs).

Usage: analyze_plots.py OUT   (OUT holds positional.safetensors, position_table.safetensors,
analysis_input.json and, when the run logged metrics, curves.csv)

Writes into OUT:
  positional_heads.png   one heatmap per head of the positional logit term (H, L, L)
  word_to_position.png   BERT-A and BERT-A^d only: the word-to-position and position-to-word terms (H x L each)
  probes.csv / probes.md the probes of Wang & Chen (2020), "What Do Position Embeddings Learn?":
      position regression: linear least squares from a position vector to its index, mean
          absolute error (positions) on held-out positions (random 20 %) and on the fit;
      pairwise order: logistic regression on the concatenated vectors [p_i; p_j] (features
          standardised) predicting i < j, error rate on held-out pairs (pairs are split by a
          random 20 % of pairs; at most 20,000 pairs are drawn).
  curves.png             MLM loss (and validation loss) and learning rate against the step
  analysis.json          analysis_input.json plus the probe numbers and every PNG with its size
Every figure's pixel size is figsize x dpi (recorded in analysis.json).
Exits non-zero (never skips) when numpy, scikit-learn, matplotlib or safetensors is missing.
"""
import csv
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from safetensors.numpy import load_file  # noqa: E402
from sklearn.linear_model import LinearRegression, LogisticRegression  # noqa: E402
from sklearn.preprocessing import StandardScaler  # noqa: E402

DPI = 100


def save(fig, path, figures):
    fig.savefig(path, dpi=DPI)
    w, h = fig.get_size_inches()
    figures[os.path.basename(path)] = {"width_px": int(round(w * DPI)), "height_px": int(round(h * DPI))}
    plt.close(fig)


def heatmaps(out, term, title, figures):
    H = term.shape[0]
    cols = min(H, 4)
    rows = (H + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(3 * cols, 3 * rows), squeeze=False)
    for h in range(rows * cols):
        ax = axes[h // cols][h % cols]
        if h >= H:
            ax.axis("off")
            continue
        im = ax.imshow(term[h], cmap="viridis", aspect="auto")
        ax.set_title(f"head {h}", fontsize=9)
        ax.set_xlabel("key position j", fontsize=8)
        ax.set_ylabel("query position i", fontsize=8)
        fig.colorbar(im, ax=ax, fraction=0.046)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    save(fig, os.path.join(out, "positional_heads.png"), figures)


def mixed_terms(out, wp, pw, variant, figures):
    fig, axes = plt.subplots(2, 1, figsize=(8, 6))
    for ax, m, name, xl in ((axes[0], wp, "word-to-position (mean word query, key position j)", "key position j"),
                            (axes[1], pw, "position-to-word (query position i, mean word key)", "query position i")):
        im = ax.imshow(m, cmap="coolwarm", aspect="auto")
        ax.set_title(name, fontsize=9)
        ax.set_xlabel(xl, fontsize=8)
        ax.set_ylabel("head", fontsize=8)
        fig.colorbar(im, ax=ax)
    name = "BERT-A^d" if variant == "bert-absolute-untied" else "BERT-A"
    fig.suptitle(f"{name} first layer: the mixed terms TUPE removes", fontsize=10)
    fig.tight_layout()
    save(fig, os.path.join(out, "word_to_position.png"), figures)


def probes(table, positions, seed):
    """Returns {probe: {metric, train, test}} (analyze_plots.py docstring)."""
    rng = np.random.default_rng(seed)
    x = table.astype(np.float64)
    y = positions.astype(np.float64)
    n = len(y)
    perm = rng.permutation(n)
    n_test = max(1, n // 5)
    test, train = perm[:n_test], perm[n_test:]
    reg = LinearRegression().fit(x[train], y[train])
    mae_train = float(np.mean(np.abs(reg.predict(x[train]) - y[train])))
    mae_test = float(np.mean(np.abs(reg.predict(x[test]) - y[test])))

    pairs = np.array([(i, j) for i in range(n) for j in range(n) if i != j])
    if len(pairs) > 20000:
        pairs = pairs[rng.choice(len(pairs), 20000, replace=False)]
    pairs = pairs[rng.permutation(len(pairs))]
    feats = np.concatenate([x[pairs[:, 0]], x[pairs[:, 1]]], axis=1)
    labels = (y[pairs[:, 0]] < y[pairs[:, 1]]).astype(int)
    n_test = max(1, len(pairs) // 5)
    scaler = StandardScaler().fit(feats[n_test:])
    f_train, f_test = scaler.transform(feats[n_test:]), scaler.transform(feats[:n_test])
    clf = LogisticRegression(C=1e4, max_iter=5000).fit(f_train, labels[n_test:])
    err_train = float(np.mean(clf.predict(f_train) != labels[n_test:]))
    err_test = float(np.mean(clf.predict(f_test) != labels[:n_test]))
    return {
        "position_regression": {"metric": "mean absolute error (positions)", "train": mae_train, "test": mae_test,
                                "positions": int(n)},
        "pairwise_order": {"metric": "error rate", "train": err_train, "test": err_test, "pairs": int(len(pairs))},
    }


def curves(out, path, figures):
    steps, loss, lr, vsteps, vloss = [], [], [], [], []
    with open(path) as f:
        for row in csv.DictReader(f):
            s = int(row["step"])
            if row["loss"]:
                steps.append(s)
                loss.append(float(row["loss"]))
                lr.append(float(row["lr"]) if row["lr"] else np.nan)
            if row["validation_loss"]:
                vsteps.append(s)
                vloss.append(float(row["validation_loss"]))
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
    a.plot(steps, loss, label="train MLM loss")
    if vsteps:
        a.plot(vsteps, vloss, "o-", label="validation loss")
    a.set_xlabel("step")
    a.set_ylabel("loss (nats per masked token)")
    a.legend()
    b.plot(steps, lr, color="tab:orange")
    b.set_xlabel("step")
    b.set_ylabel("learning rate")
    fig.tight_layout()
    save(fig, os.path.join(out, "curves.png"), figures)
    return {"records": len(steps), "validation_records": len(vsteps)}


def main():
    out = sys.argv[1]
    info = json.load(open(os.path.join(out, "analysis_input.json")))
    figures = {}
    terms = load_file(os.path.join(out, "positional.safetensors"))
    variant = info["position_encoding"]
    titles = {"bert-absolute": " (first layer, position-position)",
              "bert-absolute-untied": " (first layer, position-position)",
              "rope": " (first layer, the mean word's query and key rotated to each position)",
              "alibi": " (ALiBi's fixed bias -m_h |i - j|)",
              "none": " (none: NoPE has no positional term)"}
    heatmaps(out, terms["positional_term"],
             f"{variant}: positional logit term per head" + titles.get(variant, " (after the [CLS] reset)"), figures)
    if "word_to_position" in terms:
        mixed_terms(out, terms["word_to_position"], terms["position_to_word"], variant, figures)
    result = {}
    if info.get("position_table", "position_table.safetensors"):
        table = load_file(os.path.join(out, "position_table.safetensors"))
        result = probes(table["table"], table["positions"], int(info["seed"]))
    with open(os.path.join(out, "probes.csv"), "w") as f:
        f.write("probe,metric,train,test\n")
        for k, v in result.items():
            f.write(f"{k},{v['metric']},{v['train']:.6g},{v['test']:.6g}\n")
    md = ["| probe (Wang & Chen 2020) | metric | train | held-out |", "|---|---|---|---|"]
    for k, v in result.items():
        md.append(f"| {k.replace('_', ' ')} | {v['metric']} | {v['train']:.4g} | {v['test']:.4g} |")
    if not result:
        md.append(f"| (none) | {variant} learns no position vectors to probe | | |")
    with open(os.path.join(out, "probes.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    info["probes"] = result
    curves_path = os.path.join(out, "curves.csv")
    if os.path.exists(curves_path):
        info["curves"] = curves(out, curves_path, figures)
    info["figures"] = figures
    with open(os.path.join(out, "analysis.json"), "w") as f:
        json.dump(info, f, indent=2)


if __name__ == "__main__":
    main()
