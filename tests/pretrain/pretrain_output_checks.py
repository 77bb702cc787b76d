"""Checks of what `tupe pretrain` reports (run through pretrain_checks.py CHECK WORKDIR):
TensorBoard scalars against the metrics JSONL (tensorboard), warnings once per job
(warnings), an instant start and honest MFU figures (mfu)."""
import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np

from pretrain_common import DATA, ENV, SRC, TUPE, mpirun, pretrain_args


def tensorboard_scalars(folder):
    """{tag: [(step, value)]} of every event file under `folder`, read by TensorBoard's own
    EventAccumulator (so the file's framing, CRCs and schema are TensorBoard's to judge)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    acc = EventAccumulator(folder, size_guidance={"scalars": 0})
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def expect_scalars(got, want, what):
    """`want`: {tag: [(step, float64 value)]}; TensorBoard keeps float32, so each value must be
    the float32 rounding of the JSON's, exactly."""
    if set(got) != set(want):
        sys.exit(f"FAILED: {what}: TensorBoard tags {sorted(got)} != expected {sorted(want)}")
    for tag, points in want.items():
        expected = [(step, float(np.float32(v))) for step, v in points]
        if got[tag] != expected:
            sys.exit(f"FAILED: {what}: {tag}: TensorBoard {got[tag][:5]}... != JSONL {expected[:5]}...")


def check_tensorboard(work):
    """pretrain and finetune write TensorBoard scalars equal to their JSONL / results.json;
    train.tensorboard false and finetune.tensorboard false write none."""
    ck = os.path.join(work, "tb")
    shutil.rmtree(ck, ignore_errors=True)
    mpirun(2, pretrain_args(work, ck, **{"train.max_steps": 20, "optimizer.total_steps": 20, "train.log_every": 5,
                                          "data.validation_shards": f"{work}/../shards", "train.eval_every": 10,
                                          "train.eval_batches": 2}) + ["--resume", "none"])
    want = {}
    for line in open(os.path.join(ck, "metrics", "rank_0.jsonl")):
        r = json.loads(line)
        for k, v in r.items():
            if k in ("step", "epoch") or isinstance(v, bool) or not isinstance(v, (int, float)):
                continue
            tag = "validation/" + k[len("validation_"):] if k.startswith("validation_") else "train/" + k
            want.setdefault(tag, []).append((r["step"], v))
    got = tensorboard_scalars(os.path.join(ck, "tensorboard"))
    expect_scalars(got, want, "pretrain")
    for tag in ("train/loss", "train/lr", "train/grad_norm", "train/loss_scale", "train/skipped_steps",
                "train/tokens_per_s", "validation/loss"):
        if tag not in got:
            sys.exit(f"FAILED: pretrain: no {tag} in TensorBoard ({sorted(got)})")
    print(f"pretrain: {len(got)} TensorBoard tags, {sum(map(len, got.values()))} scalars equal to the JSONL")

    off = os.path.join(work, "tb_off")
    shutil.rmtree(off, ignore_errors=True)
    mpirun(1, pretrain_args(work, off, **{"train.max_steps": 2, "optimizer.total_steps": 2, "optimizer.warmup_steps": 1,
                                           "train.tensorboard": "false"}) + ["--resume", "none"])
    if os.path.exists(os.path.join(off, "tensorboard")):
        sys.exit("FAILED: train.tensorboard false still wrote " + os.path.join(off, "tensorboard"))

    glue = os.path.join(work, "tb_glue")
    shutil.rmtree(glue, ignore_errors=True)
    vocab = os.path.join(DATA, "vocab", "bert-base-uncased-vocab.txt")
    args = ["finetune", "--config", os.path.join(SRC, "configs", "glue", "tiny.ini"), "--finetune.tasks", "RTE",
            "--finetune.checkpoint", os.path.join(ck, "step_00000020"), "--finetune.data_dir",
            os.path.join(DATA, "glue"), "--tokenizer.vocab", vocab, "--finetune.output_dir", glue,
            "--finetune.train_rows", "64", "--finetune.epochs", "2", "--finetune.predict_test", "false",
            "--finetune.save_model", "false", "--finetune.threads", "1"]
    mpirun(1, args)
    results = json.load(open(os.path.join(glue, "results.json")))
    runs = [(t["task"], run) for t in results["tasks"] for run in t["runs"]]
    for task, run in runs:
        want = {"train/loss": [], "train/learning_rate": []}
        for e in run["epochs"]:
            want["train/loss"].append((e["epoch"], e["train_loss"]))
            want["train/learning_rate"].append((e["epoch"], e["learning_rate"]))
            for split, metrics in e["dev"].items():
                for metric, v in metrics.items():
                    want.setdefault(f"dev/{split}/{metric}", []).append((e["epoch"], v))
        folder = os.path.join(glue, "tensorboard", task, f"lr{run['lr']:g}_seed{run['seed']}")
        expect_scalars(tensorboard_scalars(folder), want, f"finetune {task} lr {run['lr']:g} seed {run['seed']}")
    print(f"finetune: {len(runs)} run(s), TensorBoard equal to results.json per epoch")
    shutil.rmtree(glue)
    mpirun(1, args + ["--finetune.tensorboard", "false"])
    if os.path.exists(os.path.join(glue, "tensorboard")):
        sys.exit("FAILED: finetune.tensorboard false still wrote " + os.path.join(glue, "tensorboard"))
    print("tensorboard OK")


def check_warnings(work):
    import h5py
    v2 = os.path.join(work, "v2")
    shutil.rmtree(v2, ignore_errors=True)
    os.makedirs(v2)
    shards = os.path.join(work, "..", "shards")
    for name in sorted(os.listdir(shards)):
        if not name.startswith("train-"):
            continue
        path = os.path.join(v2, name)
        shutil.copy(os.path.join(shards, name), path)
        with h5py.File(path, "r+") as f:  # what format version 2 wrote: no per-sample checksums
            del f["sample_checksums"]
            dtype = f.attrs["format_version"].dtype
            f.attrs.create("format_version", 2, dtype=dtype)
    # tiny.ini with lower_case = false: the uncased shards contradict it, and a config file yields.
    text = open(os.path.join(SRC, "configs", "tiny.ini")).read()
    assert "lower_case = true" in text
    cfg = os.path.join(work, "tiny_cased.ini")
    vocab = os.path.join(DATA, "vocab", "bert-base-uncased-vocab.txt")
    with open(cfg, "w") as f:
        for line in text.replace("lower_case = true", "lower_case = false").splitlines():
            f.write(("vocab = " + vocab if line.startswith("vocab = ") else line) + "\n")
    ck = os.path.join(work, "ck")
    shutil.rmtree(ck, ignore_errors=True)
    args = pretrain_args(work, ck, **{"data.train_shards": v2, "train.max_steps": 2})
    args[args.index("--config") + 1] = cfg
    p = mpirun(2, args)
    for what in ("read unverified", "tokenizer.lower_case = false of " + cfg):
        n = p.stderr.count(what)
        print(f"'{what}': {n} time(s) from 2 ranks")
        if n != 1:
            sys.exit(f"FAILED: '{what}' printed {n} times, not once\n{p.stderr[-3000:]}")
    effective = open(os.path.join(ck, "effective_config.ini")).read()
    section = effective[effective.index("[tokenizer]"):].split("\n\n")[0]
    print("effective_config.ini:", section.replace("\n", "; "))
    if "lower_case = true" not in section.splitlines():
        sys.exit(f"FAILED: effective_config.ini does not show the shards' lower_case = true:\n{section}")
    state = json.load(open(os.path.join(ck, "step_00000002", "trainer_state.json")))
    if state["config"]["tokenizer.lower_case"] != "true":
        sys.exit(f"FAILED: the checkpoint's config says {state['config']['tokenizer.lower_case']}")
    print("warnings once per job OK; effective_config.ini shows the shards' tokenizer")


def check_mfu(work):
    clock_ghz = max(float(l.split(":")[1]) for l in open("/proc/cpuinfo") if l.startswith("cpu MHz")) / 1000
    try:
        clock_ghz = max(clock_ghz, int(open("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq").read()) / 1e6)
    except OSError:
        pass
    for precision in ("fp32", "bf16"):
        shutil.rmtree(os.path.join(work, precision), ignore_errors=True)
        cache = os.path.join(work, precision, "cache")  # empty: nothing measured before
        os.makedirs(cache)
        ck = os.path.join(work, precision, "ckpt")
        args = pretrain_args(work, ck, **{"precision.precision": precision, "train.max_steps": 3,
                                                  "checkpoint.every_steps": 0, "train.threads": 2, "train.progress": "true"})
        args += ["--resume", "none"]
        cmd = ["mpirun", "-np", "1", "--oversubscribe", "--bind-to", "none", TUPE] + args
        p = subprocess.Popen(cmd, env=dict(ENV, TUPE_CACHE=cache), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True)
        stamps, lines = {}, []
        for line in p.stdout:
            lines.append(line.rstrip())
            now = time.monotonic()
            if "# effective config:" in line:
                stamps.setdefault("config", now)
            if "step 1/3 " in line:
                stamps.setdefault("step1", now)
        if p.wait() != 0:
            sys.exit(f"FAILED: {' '.join(cmd)}\n" + "\n".join(lines[-20:]))
        if "config" not in stamps or "step1" not in stamps:
            sys.exit("FAILED: no effective-config line or no step-1 line in:\n" + "\n".join(lines[-20:]))
        startup = stamps["step1"] - stamps["config"]
        print(f"{precision}: step 1 logged {startup:.1f} s after the effective-config line")
        if startup > 10:
            sys.exit(f"FAILED: {precision}: {startup:.1f} s from the effective-config line to step 1 (at most 10)")
        recs = [json.loads(l) for l in open(os.path.join(ck, "metrics", "rank_0.jsonl")) if '"loss"' in l]
        if len(recs) != 3:
            sys.exit(f"FAILED: {len(recs)} log records, want 3")
        for r in recs:
            src = r["mfu_peak_source"]
            # "CPU figures: 2 thread(s) x 3.644 GHz (measured; /proc/cpuinfo says 2.596) x 32 fp32 FLOP/cycle (...)"
            threads = int(src.split("CPU figures: ")[1].split(" thread")[0]) if src.startswith("CPU figures: ") else 0
            clock = float(src.split(" thread(s) x ")[1].split(" GHz")[0]) if threads else 0
            per_cycle = float(src.split(" FLOP/cycle")[0].split(" x ")[-1].split()[0]) if threads else 0
            want_peak = threads * clock * per_cycle / 1e3
            mfu = r["flops_per_token"] * r["tokens_per_s"] / (r["mfu_peak_tflops"] * 1e12)
            print(f"  step {r['step']}: MFU {r['mfu']:.4%} (peak {r['mfu_peak_tflops']:.4g} TFLOP/s: {src})")
            # The clock is the highest of /proc/cpuinfo's (and cpufreq's) and the probe's: never
            # below what the system reports, never above any shipped boost clock.
            if not (threads == 2 and f" {precision} FLOP/cycle" in src and clock_ghz - 5e-4 <= clock < 7.0 and
                    abs(r["mfu_peak_tflops"] - want_peak) <= 1e-3 * want_peak):
                sys.exit(f"FAILED: the peak {r['mfu_peak_tflops']} is not 2 threads x a clock of at least "
                         f"{clock_ghz} GHz x the FLOPs/cycle it names: {src}")
            if not (0 < r["mfu"] <= 1 and abs(mfu - r["mfu"]) <= 1e-6 * mfu):
                sys.exit(f"FAILED: MFU {r['mfu']} (recomputed {mfu}) is not in (0, 1]")
            if not 0 <= r["data_wait_fraction"] <= 1:
                sys.exit(f"FAILED: data_wait_fraction {r['data_wait_fraction']} is not a share of the window")
        if os.listdir(cache):
            sys.exit(f"FAILED: the run wrote into $TUPE_CACHE: {os.listdir(cache)}")
    print("MFU: instant start, honest figures OK")
