"""Reference side of the GLUE metric test (tests/finetune/test_metrics.cpp): the GLUE
benchmark's metric implementations (scikit-learn, scipy) on the vectors the C++ test wrote.

  metrics_ref.py IN
IN (JSON): {"cases": [{"pred": [...], "gold": [...], "kind": "labels" | "scores"}, ...]}
Prints one JSON object: {"results": [{"accuracy", "f1", "mcc"} or {"pearson", "spearman"}]}.
A missing library raises ImportError, so the C++ test fails (it never skips).
"""
import json
import sys

import numpy as np
from scipy.stats import pearsonr, spearmanr
from sklearn.metrics import accuracy_score, f1_score, matthews_corrcoef


def main():
    with open(sys.argv[1]) as f:
        cases = json.load(f)["cases"]
    results = []
    for c in cases:
        pred, gold = np.asarray(c["pred"]), np.asarray(c["gold"])
        if c["kind"] == "labels":
            r = {"accuracy": float(accuracy_score(gold, pred)), "mcc": float(matthews_corrcoef(gold, pred))}
            if set(np.unique(np.concatenate([pred, gold]))) <= {0, 1}:
                r["f1"] = float(f1_score(gold, pred))
        else:
            r = {"pearson": float(pearsonr(pred, gold)[0]), "spearman": float(spearmanr(pred, gold)[0])}
        results.append(r)
    print(json.dumps({"results": results}))


if __name__ == "__main__":
    main()
