"""launch/gpu_figures.py on the files real runs write (the figures of launch/gpu_check.sh):
a short `tupe pretrain` on the CPU (its metrics file), a two-round variant_step_bench
(its tables), allreduce_bench at one and two ranks, and a steps table with its plan; each
figure is checked against values this script computes from the same files on its own.
  figures_check.py WORK_DIR SHARDS_DIR
Environment: TUPE_BIN, TUPE_SOURCE_DIR, VARIANT_STEP_BENCH, ALLREDUCE_BENCH (the benchmark
executables).
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
    if "MFU" not in got or "loss scale" in got:  # fp32: a measured CPU peak, scale 1, nothing skipped
        sys.exit(f"FAILED: an fp32 CPU run's figures should carry an MFU and no loss scale: '{got}'")
    print("pretrain figures:", got)
    # The check's small-model rows: launch-bound, no MFU figure, the same tokens/s.
    got = figures("pretrain", metrics, "--launch-bound")
    if not got.startswith("launch-bound: ") or "MFU" not in got or re.search(r"MFU [\d.]+%", got):
        sys.exit(f"FAILED: --launch-bound must label the tokens/s and give no MFU figure: '{got}'")
    if abs(number(got, r"launch-bound: ([\d,]+) tokens/s") - want_tps) > 0.5 + 1e-6 * want_tps:
        sys.exit(f"FAILED: tokens/s in '{got}', want {want_tps:.1f}")
    # An fp16 run's last record: the loss scale and the skipped steps are reported.
    fp16 = os.path.join(work, "fp16.jsonl")
    with open(fp16, "w") as f:
        for r in records:
            if "tokens_per_s" in r:
                r = dict(r, loss_scale=32768.0, skipped_steps=3)
            f.write(json.dumps(r) + "\n")
    got = figures("pretrain", fp16, "--launch-bound")
    if "loss scale 32768, 3 skipped step(s)" not in got:
        sys.exit(f"FAILED: fp16 figures must give the last loss scale and the skipped steps: '{got}'")
    print("pretrain figures (launch-bound, fp16):", got)

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

    # allreduce_bench: two MPI ranks give bandwidths; one rank gives microseconds per call only.
    for ranks in (2, 1):
        log = os.path.join(work, f"allreduce-{ranks}.log")
        text = run(["mpirun", "-np", str(ranks), os.environ["ALLREDUCE_BENCH"], "--device", "cpu",
                    "--min_bytes", "4K", "--max_bytes", "64K", "--iters", "3"])
        open(log, "w").write(text)
        got = figures("allreduce", log)
        last = [line.split() for line in text.splitlines() if line.strip() and not line.startswith("#")][-1]
        if ranks == 1:
            if last[3:5] != ["-", "-"] or "world size 1: an in-place one-rank sum moves no bytes" not in text:
                sys.exit(f"FAILED: allreduce_bench at one rank must print no bandwidth:\n{text}")
            if "GB/s" in got or abs(number(got, r"KiB ([\d,.]+) us per call") - float(last[2])) > 0.051:
                sys.exit(f"FAILED: one-rank figures '{got}' should be {last[2]} us per call, no GB/s")
        elif abs(number(got, r"busbw ([\d.]+) GB/s") - float(last[4])) > 0.006:
            sys.exit(f"FAILED: two-rank figures '{got}' disagree with the last row {last}")
        print(f"allreduce figures, {ranks} rank(s):", got)

    steps = os.path.join(work, "steps.tsv")
    with open(steps, "w") as f:
        f.write("build\tbuild\tok\t800\tparallel\t300\t100\t1200\t6 targets\n")
        f.write("figures\tbench-128\tok\t40\tgpu\t90\t30\t30\tx\n")
        f.write("rest\tcuda-tier\tok\t12\tgpu\t150\t60\t3\t20 tests\n")
        f.write("rest\tfinetune\tskipped\t0\tgpu\t60\t40\t0\tno time left\n")
    text = figures("summary", steps, "--title", "T", "--here-cores", "2", "--host-cores", "16", "--deadline", "400",
                   "--reserve", "120")
    # 1200 CPU-s on 16 cores at 75% -> 100 s; GPU steps (run or not) at their planned times:
    # 100 + 30 + 60 + 40 = 230 (+ 120 = 350); up to the last figure with bench-128 at its cap
    # 90: 100 + 90 (+ 120 = 310).
    for want in ("| build | build | parallel | 800 | 1200 | 100 | 100 | 300 |", "| rest | finetune | gpu | 0 | 0 | 40 |",
                 "every step: estimated 230 s; fits in the 385 s the 400 s deadline leaves for steps",
                 "every step with the 120 s reserve: 350 s; fits in the 385 s",
                 "every GPU figure at its cap: 190 s + 120 s reserve = 310 s; fits", "- plan: FITS"):
        if want not in text:
            sys.exit(f"FAILED: '{want}' not in the summary:\n{text}")
    # With the GPU steps' own times (a run on the host): 100 + 40 + 12 + 40 = 192.
    text = figures("summary", steps, "--title", "T", "--measured-gpu", "--deadline", "400")
    if "every step: estimated 192 s;" not in text or "reserve: 312 s; fits" not in text:
        sys.exit(f"FAILED: --measured-gpu must take the GPU steps' own times:\n{text}")
    # The reserve (a host's start-up) counts in full: deadline 365 leaves 350 s for steps, and
    # all steps with the reserve (350 s) fit. Deadline 330 leaves 315 s: all steps alone (230 s)
    # and the figures with the reserve (310 s) fit, everything with the reserve does not, and
    # the plan fails naming the last step it would cut.
    fits = subprocess.run(FIGURES + ["plan", steps, "--deadline", "365"], capture_output=True, text=True)
    short = subprocess.run(FIGURES + ["plan", steps, "--deadline", "330"], capture_output=True, text=True)
    if fits.returncode != 0 or "- plan: FITS" not in fits.stdout:
        sys.exit(f"FAILED: plan at 365 s must fit:\n{fits.stdout}{fits.stderr}")
    if (short.returncode != 1 or "- plan: DOES NOT FIT" not in short.stdout
            or "over the 315 s by 35 s" not in short.stdout or "would be cut: finetune" not in short.stdout):
        sys.exit(f"FAILED: plan at 330 s must fail and name finetune as cut:\n{short.stdout}{short.stderr}")
    bad = subprocess.run(FIGURES + ["pretrain", steps], capture_output=True, text=True)
    if bad.returncode != 1 or not bad.stderr.startswith("figures: "):
        sys.exit(f"FAILED: a file without metrics must give exit 1 and a 'figures:' line, got {bad.returncode}: {bad.stderr}")
    print("figures checks passed")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
