"""launch/gpu_figures.py on the files real runs write (the figures of launch/gpu_check.sh):
a short `tupe pretrain` on the CPU (its metrics file), a two-round variant_step_bench
(its tables), and a steps table; each figure is checked against values this script computes
from the same files on its own.
  figures_check.py WORK_DIR SHARDS_DIR
Environment: TUPE_BIN, TUPE_SOURCE_DIR, VARIANT_STEP_BENCH (the benchmark executable).
"""
import json
import os
import re
import shutil
import subprocess
import sys

SRC = os.environ["TUPE_SOURCE_DIR"]
FIGURES = [sys.executable, os.path.join(SRC, "launch", "gpu_figures.py")]
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_btl_vader_single_copy_mechanism="none", OMP_NUM_THREADS="1")


def run(args, **kw):
    p = subprocess.run(args, env=ENV, capture_output=True, text=True, timeout=600, **kw)
    if p.returncode != 0:
        sys.exit(f"FAILED: {' '.join(args[:3])}...: exit {p.returncode}\n{p.stdout}\n{p.stderr}")
    return p.stdout


def figures(*args):
    return run(FIGURES + list(args)).strip()


def number(text, pattern):
    m = re.search(pattern, text)
    if m is None:
        sys.exit(f"FAILED: '{pattern}' not in: {text}")
    return float(m.group(1).replace(",", ""))


def main(work, shards):
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    ck = os.path.join(work, "ck")
    run(["mpirun", "-np", "1", os.environ["TUPE_BIN"], "pretrain", "--config", os.path.join(SRC, "configs", "tiny.ini"),
         "--resume", "none", "--data.train_shards", shards, "--data.validation_shards", shards,
         "--model.hidden_size", "32", "--model.num_layers", "1", "--model.num_heads", "2", "--model.ffn_size", "64",
         "--data.global_batch_size", "4", "--train.micro_batch_size", "4", "--train.max_steps", "5",
         "--train.log_every", "1", "--train.eval_every", "5", "--train.eval_batches", "1", "--train.progress", "false",
         "--precision.precision", "fp32", "--checkpoint.dir", ck, "--checkpoint.every_steps", "0", "--train.threads", "1"])
    metrics = os.path.join(ck, "metrics", "rank_0.jsonl")
    records = [json.loads(line) for line in open(metrics) if line.strip()]
    train = [r for r in records if "tokens_per_s" in r]
    val = [r for r in records if "validation_loss" in r]
    got = figures("pretrain", metrics)
    want_tps = sum(r["tokens_per_s"] for r in train[2:]) / len(train[2:])
    if abs(number(got, r"^([\d,]+) tokens/s") - want_tps) > 0.5 + 1e-6 * want_tps:
        sys.exit(f"FAILED: tokens/s in '{got}', want {want_tps:.1f} (mean after the first two of {len(train)})")
    if abs(number(got, r"last loss ([\d.]+)") - train[-1]["loss"]) > 5e-4:
        sys.exit(f"FAILED: last loss in '{got}', want {train[-1]['loss']:.4f}")
    if not val or abs(number(got, r"validation ([\d.]+)") - val[-1]["validation_loss"]) > 5e-4:
        sys.exit(f"FAILED: validation loss in '{got}', want {val[-1]['validation_loss'] if val else None}")
    print("pretrain figures:", got)

    bench = run([os.environ["VARIANT_STEP_BENCH"], "--shards", shards, "--hidden", "64", "--layers", "1", "--seq", "128",
                 "--batch", "2", "--rounds", "2", "--warmup", "0", "--sdpa", "both"])
    log = os.path.join(work, "bench.log")
    open(log, "w").write(bench)
    got = figures("bench", log)
    for mode in ("pinned", "default"):
        table = bench.split(f"sdpa {mode}:")[1].split("sdpa ")[0]
        row = re.search(r"^tupe-relative\s+([\d.]+)\s+[\d.]+\s+([\d.]+)\s+(\d+)", table, re.M)
        ratio, tps = float(row.group(2)), float(row.group(3))
        part = got.split(f"{mode} [")[1]
        if abs(number(part, r"TUPE-R/BERT-A ([\d.]+)") - ratio) > 1e-3 or abs(number(part, r"TUPE-R ([\d,]+) tok/s") - tps) > 1:
            sys.exit(f"FAILED: bench figures '{got}' disagree with the {mode} table:\n{table}")
    print("bench figures:", got)

    steps = os.path.join(work, "steps.tsv")
    with open(steps, "w") as f:
        f.write("build\tbuild\tok\t800\tparallel\t300\t1200\t6 targets\n")
        f.write("build\tcuda-tier\tok\t12\tgpu\t150\t3\t20 tests\n")
        f.write("bench\tbench-128\tok\t40\tgpu\t90\t30\tx\n")
    text = figures("summary", steps, "--here-cores", "2", "--host-cores", "16")
    # 1200 CPU-s on 16 cores at 75% -> 100 s; the GPU step takes its budget: 250 s for call build.
    if "| build | build | parallel | 800 | 1200 | 100 | 300 |" not in text or "call `build`: estimated 250 s" not in text:
        sys.exit(f"FAILED: the device plan of the summary:\n{text}")
    bad = subprocess.run(FIGURES + ["pretrain", steps], capture_output=True, text=True)
    if bad.returncode != 1 or not bad.stderr.startswith("figures: "):
        sys.exit(f"FAILED: a file without metrics must give exit 1 and a 'figures:' line, got {bad.returncode}: {bad.stderr}")
    print("figures checks passed")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
