"""Custom tasks end to end (GlueE2E_custom_*): files made from real GLUE rows, fine-tuned with
`mpirun -np 2 tupe finetune` through a [task] section, evaluated with `tupe evaluate`.

Usage: custom_task_checks.py make WORKDIR   writes the task files and the two configs:
         sentiment  CSV classification from SST-2 (labels renamed negative/positive; sentences
                    with commas and quotes are quoted by Python's csv writer; one train row with
                    an unknown label and one with a missing field: skipped with --skip-bad-rows);
                    metrics mcc, accuracy, f1; the test file is the dev rows with an id column
         similarity JSONL regression from STS-B (two texts, numeric score; one line of invalid
                    JSON, one without the score: skipped); pearson, spearman; test = dev rows
       custom_task_checks.py check WORKDIR  checks results.json / results.md / submissions of both
         runs and `tupe evaluate`'s report: the metrics evaluate reports equal those computed
         here with scikit-learn / scipy from evaluate's submission of the same rows.
Environment: TUPE_SHARED_DATA.
"""
import csv
import json
import math
import os
import sys

GLUE = os.path.join(os.environ["TUPE_SHARED_DATA"], "glue")


def read_tsv(path):
    with open(path, encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))


def make(work):
    os.makedirs(work, exist_ok=True)
    names = {"0": "negative", "1": "positive"}
    sst_train, sst_dev = read_tsv(os.path.join(GLUE, "SST-2", "train.tsv"))[:1000], read_tsv(os.path.join(GLUE, "SST-2", "dev.tsv"))
    with open(os.path.join(work, "sentiment_train.csv"), "w", encoding="utf-8", newline="") as f:
        w = csv.writer(f)
        w.writerow(["id", "sentence", "label"])
        for i, r in enumerate(sst_train):
            w.writerow([i, r["sentence"], names[r["label"]]])
            if i == 10:
                w.writerow([10.5, "a row with an unknown label", "neutral"])
                w.writerow([10.6, "a row with a field missing"])
    for split in ("dev", "test"):  # the test file: the dev rows (its label column is not read)
        with open(os.path.join(work, f"sentiment_{split}.csv"), "w", encoding="utf-8", newline="") as f:
            w = csv.writer(f)
            w.writerow(["id", "sentence", "label"])
            for i, r in enumerate(sst_dev):
                w.writerow([f"d{i}", r["sentence"], names[r["label"]]])
    sts_train, sts_dev = read_tsv(os.path.join(GLUE, "STS-B", "train.tsv"))[:1000], read_tsv(os.path.join(GLUE, "STS-B", "dev.tsv"))
    with open(os.path.join(work, "similarity_train.jsonl"), "w", encoding="utf-8") as f:
        for i, r in enumerate(sts_train):
            f.write(json.dumps({"a": r["sentence1"], "b": r["sentence2"], "score": float(r["score"])}) + "\n")
            if i == 20:
                f.write('{"a": "broken json", \n')
                f.write(json.dumps({"a": "no score", "b": "here"}) + "\n")
    for split in ("dev", "test"):
        with open(os.path.join(work, f"similarity_{split}.jsonl"), "w", encoding="utf-8") as f:
            for i, r in enumerate(sts_dev):
                f.write(json.dumps({"id": f"s{i}", "a": r["sentence1"], "b": r["sentence2"], "score": float(r["score"])}) + "\n")
    configs = {
        "sentiment.ini": ["name = sentiment", "train = {w}/sentiment_train.csv", "dev = {w}/sentiment_dev.csv",
                          "test = {w}/sentiment_test.csv", "text_a = sentence", "label = label", "index = id",
                          "kind = classification", "labels = negative,positive", "metrics = mcc,accuracy,f1", "epochs = 2"],
        "similarity.ini": ["name = similarity", "train = {w}/similarity_train.jsonl", "dev = {w}/similarity_dev.jsonl",
                           "test = {w}/similarity_test.jsonl", "text_a = a", "text_b = b", "label = score", "index = id",
                           "kind = regression", "epochs = 2"],
    }
    for name, lines in configs.items():
        task = name.split(".")[0]
        with open(os.path.join(work, name), "w", encoding="utf-8") as f:
            f.write("[finetune]\ntasks = " + task + "\nbatch_size = 32\nselect_epoch = best\n\n[task]\n")
            f.write("\n".join(line.format(w=work) for line in lines) + "\n")
    print(f"wrote the task files and configs under {work}")


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        sys.exit(1)


def submission(path):
    rows = read_tsv(path)
    return [r["index"] for r in rows], [r["prediction"] for r in rows]


def check_run(work, task, gold, metrics, kind):
    from scipy.stats import pearsonr, spearmanr
    from sklearn.metrics import accuracy_score, f1_score, matthews_corrcoef
    res = json.load(open(os.path.join(work, f"out_{task}", "results.json")))
    check(res["world_size"] == 2, f"{task}: fine-tuned on 2 ranks")
    t = res["tasks"][0]
    check(t["task"] == task and t["kind"] == kind and t["primary_metric"] == metrics[0], f"{task}: {kind}, primary {metrics[0]}")
    check(sum(t["skipped_rows"].values()) == 2 if isinstance(t["skipped_rows"], dict) else t["skipped_rows"] == 2,
          f"{task}: the 2 bad train rows skipped ({t['skipped_rows']})")
    reported = t["runs"][0]["dev"]["dev"] if t.get("runs") else None
    check(reported is not None and sorted(reported) == sorted(metrics), f"{task}: dev metrics {sorted(reported or {})}")
    md = open(os.path.join(work, f"out_{task}", "results.md")).read()
    check(f"| {task} |" in md, f"{task}: a row of results.md")
    check("of 9)" not in md and "GLUE dev results" not in md, f"{task}: no empty GLUE row for a custom-only job")
    ids, preds = submission(os.path.join(work, f"out_{task}", "submission", f"{task}.tsv"))
    check(ids == [f"{'d' if kind == 'classification' else 's'}{i}" for i in range(len(gold))], f"{task}: submission ids from the index column")
    # `tupe evaluate` of the saved model: its dev metrics equal those of its own test
    # submission (the same rows), computed here with the reference libraries.
    ev = json.load(open(os.path.join(work, f"eval_{task}", f"evaluation_{task}.json")))["dev"]["dev"]
    _, preds = submission(os.path.join(work, f"eval_{task}", "submission", f"{task}.tsv"))
    if kind == "classification":
        g = [["negative", "positive"].index(x) for x in gold]
        p = [["negative", "positive"].index(x) for x in preds]
        ref = {"accuracy": accuracy_score(g, p), "f1": f1_score(g, p), "mcc": matthews_corrcoef(g, p)}
        tol = 1e-12
    else:
        g, p = [float(x) for x in gold], [float(x) for x in preds]
        ref = {"pearson": pearsonr(g, p)[0], "spearman": spearmanr(g, p)[0]}
        tol = 1e-6  # the submission holds 9 significant digits (float32 outputs exactly)
    for name, value in ref.items():
        check(abs(ev[name] - value) <= tol, f"{task}: evaluate's {name} {ev[name]:.6f} == reference {value:.6f} (tol {tol})")
    check(len(set(preds)) > 1, f"{task}: the predictions vary ({len(set(preds))} distinct)")


def check_all(work):
    dev = read_tsv(os.path.join(GLUE, "SST-2", "dev.tsv"))
    check_run(work, "sentiment", [{"0": "negative", "1": "positive"}[r["label"]] for r in dev], ["mcc", "accuracy", "f1"], "classification")
    sts = read_tsv(os.path.join(GLUE, "STS-B", "dev.tsv"))
    check_run(work, "similarity", [r["score"] for r in sts], ["pearson", "spearman"], "regression")
    print("all checks passed")


if __name__ == "__main__":
    {"make": make, "check": check_all}[sys.argv[1]](sys.argv[2])
