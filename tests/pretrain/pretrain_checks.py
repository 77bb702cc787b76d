"""End-to-end checks of `tupe pretrain` under mpirun on real text (WikiText-2 test split).

Each check runs the real executable in subprocesses and inspects what it wrote (checkpoint
safetensors read with Python's `safetensors`, trainer_state.json, metrics JSONL), so the
expectations come from outside the C++ code.

Usage: pretrain_checks.py CHECK WORKDIR
The checks live here (data, exactness, resume, learning, validation), in pretrain_fault_checks.py
(crash, signal, signal_setup, watchdog) and in pretrain_output_checks.py (tensorboard, mfu,
warnings); the helpers they share in pretrain_common.py.
  shards      preprocess WikiText-2 into WORKDIR/shards (fixture for the others)
  exactness   2 ranks x micro-batch b == 1 rank x 2b == 1 rank x b with 2 accumulation steps
  exactness_cuda  the same on one GPU: 1 rank x 2b == 1 rank x b x 2 accumulation steps
              (exit 77, "skipped", when no CUDA device is visible)
  resume      10 steps + resume + 10 == 20 straight, bitwise; 2 ranks -> resume on 1 rank;
              with dropout 0.1, 2 ranks -> resume on 1 and on 3 ranks == 2 ranks throughout (1e-6)
  crash       a checkpoint write killed midway leaves the previous one for --resume auto;
              a file damaged later is refused by --resume PATH and skipped, with a message, by
              --resume auto, which refuses to start fresh over damaged checkpoints;
              --resume none refuses a folder holding checkpoints
  signal      SIGUSR1 checkpoints and stops; --resume auto continues
  signal_setup  SIGTERM during setup (before the loop): a clean stop with a checkpoint at the
              step reached (0 when still setting up), not a death by signal; resume continues
  watchdog    a stalled rank ends the whole job with the watchdog's message
  learns      tiny TUPE-R under mpirun -np 2 lowers its MLM loss clearly
  validation  the validation loss of a 2-rank job (its evaluation: device sums, one
              all-reduce) equals a float64 recomputation from its checkpoint on one process
              ($TUPE_VALIDATION_REFERENCE, validation_reference.cpp) to 1e-6 relative, and its
              masked-token accuracy (above 0) the recomputation's, token for token but near ties;
              tupe analyze --validation-shards: its position buckets add up to the same;
              --length-shards: the same text at 64 tokens scored, at 256 named as beyond the
              model's 128 positions; a RoPE model of the same run scored at 256
  tensorboard pretrain's and finetune's TensorBoard scalars (read by the tensorboard package)
              equal their metrics JSONL / results.json; off when switched off
  mfu         with an empty $TUPE_CACHE, fp32 and bf16: step 1 is logged within 10 s of the
              effective-config line, and every record's MFU is in (0, 1], recomputed here
              from flops_per_token, tokens_per_s and the peak, which is the CPU's own figures
              (threads x clock x FLOPs/cycle; the clock at least /proc/cpuinfo's)
  warnings    under mpirun -np 2 a job warns once, not once per rank (shards of format
              version 2, a config-file tokenizer value the shards contradict), and
              effective_config.ini shows the shards' tokenizer values
Environment: TUPE_BIN (the tupe executable), TUPE_SOURCE_DIR, TUPE_SHARED_DATA.
"""
import json
import os
import shutil
import subprocess
import sys

import numpy as np

import pretrain_fault_checks
import pretrain_output_checks
from pretrain_common import (DATA, SRC, checkpoint, cuda_visible, max_rel_diff, mpirun, pretrain_args,
                             version_facts)


def check_shards(work):
    out = os.path.join(work, "shards")
    mpirun(1, ["preprocess", "--config", os.path.join(SRC, "configs", "tiny.ini"),
               "--input", os.path.join(DATA, "text", "wikitext-2", "wiki.test.raw"),
               "--tokenizer.vocab", os.path.join(DATA, "vocab", "bert-base-uncased-vocab.txt"),
               "--output", out, "--overwrite", "--quiet"])
    print("shards:", sorted(os.listdir(out)))


def check_exactness(work):
    runs = {"2 ranks x b": (2, 4), "1 rank x 2b": (1, 8), "1 rank x b x 2 accumulation": (1, 4)}
    weights = {}
    for name, (np_, micro) in runs.items():
        ck = os.path.join(work, name.replace(" ", "_"))
        shutil.rmtree(ck, ignore_errors=True)
        # The paper's peak LR: Adam turns absolute gradient rounding into update noise of
        # about lr / eps times that rounding, so the comparison is made at the real LR.
        mpirun(np_, pretrain_args(work, ck, **{"train.micro_batch_size": micro, "train.max_steps": 5,
                                               "checkpoint.every_steps": 5, "optimizer.lr": 1e-4}))
        weights[name] = checkpoint(ck, 5)[0]
    ref = weights["1 rank x 2b"]
    for name, w in weights.items():
        d = max_rel_diff(w, ref)
        print(f"{name}: max relative difference to 1 rank x 2b after 5 steps = {d:.3e}")
        if d > 1e-6:
            sys.exit(f"FAILED: {name} differs from 1 rank x 2b by {d:.3e} (> 1e-6)")
    print("exactness OK")


def check_exactness_cuda(work):
    if not cuda_visible():
        print("SKIPPED: no CUDA device visible (the GPU tier runs on a GPU host: launch/gpu_check.sh)")
        sys.exit(77)
    weights = {}
    for name, micro in (("1 rank x 2b", 8), ("1 rank x b x 2 accumulation", 4)):
        ck = os.path.join(work, name.replace(" ", "_"))
        shutil.rmtree(ck, ignore_errors=True)
        mpirun(1, pretrain_args(work, ck, **{"train.micro_batch_size": micro, "train.max_steps": 5,
                                             "checkpoint.every_steps": 5, "optimizer.lr": 1e-4,
                                             "train.device": "cuda", "train.tf32": "false"}))
        weights[name] = checkpoint(ck, 5)[0]
    d = max_rel_diff(weights["1 rank x b x 2 accumulation"], weights["1 rank x 2b"])
    print(f"CUDA: 1 rank x b x 2 accumulation vs 1 rank x 2b after 5 steps: max relative difference {d:.3e}")
    # GPU matmuls of different batch shapes may pick other kernels (other summation orders);
    # a wrong loss normalisation would differ by O(1), not 1e-4.
    if d > 1e-4:
        sys.exit(f"FAILED: on CUDA the accumulated steps differ from one micro-batch by {d:.3e} (> 1e-4)")
    print("exactness on CUDA OK")


def check_resume(work):
    straight, split = os.path.join(work, "straight"), os.path.join(work, "split")
    for d in (straight, split):
        shutil.rmtree(d, ignore_errors=True)
    dropout = {"model.hidden_dropout": 0.1, "model.attention_dropout": 0.1}  # the RNG must resume too
    mpirun(1, pretrain_args(work, straight, **dropout, **{"train.max_steps": 20}) + ["--resume", "none"])
    mpirun(1, pretrain_args(work, split, **dropout, **{"train.max_steps": 10}) + ["--resume", "none"])
    mpirun(1, pretrain_args(work, split, **dropout, **{"train.max_steps": 20}) + ["--resume", "auto"])
    a, b = checkpoint(straight, 20), checkpoint(split, 20)
    for part, x, y in (("weights", a[0], b[0]), ("optimizer state", a[1], b[1])):
        assert x.keys() == y.keys(), part
        for k in x:
            if not np.array_equal(x[k], y[k]):
                sys.exit(f"FAILED: {part} tensor {k} differs after resume (not bitwise)")
    for key in ("step", "scheduler_step", "loss_scaler", "data_position"):
        if a[2][key] != b[2][key]:
            sys.exit(f"FAILED: trainer state '{key}' differs: {a[2][key]} vs {b[2][key]}")
    print("resume bitwise OK: weights, optimizer state, LR step, loss scale, data position", a[2]["data_position"])
    check_build_records(split)

    # 2 ranks for 10 steps, then 1 rank: the same global sample sequence continues.
    two = os.path.join(work, "two_then_one")
    shutil.rmtree(two, ignore_errors=True)
    mpirun(2, pretrain_args(work, two, **{"train.max_steps": 10}) + ["--resume", "none"])
    mpirun(1, pretrain_args(work, two, **{"train.max_steps": 20}) + ["--resume", "auto"])
    one = os.path.join(work, "one_straight")
    shutil.rmtree(one, ignore_errors=True)
    mpirun(1, pretrain_args(work, one, **{"train.max_steps": 20}) + ["--resume", "none"])
    x, y = checkpoint(two, 20), checkpoint(one, 20)
    if x[2]["data_position"] != y[2]["data_position"]:
        sys.exit(f"FAILED: data position {x[2]['data_position']} vs {y[2]['data_position']}")
    d = max_rel_diff(x[0], y[0])
    print(f"2 ranks -> 1 rank: data position {x[2]['data_position']}, max relative weight difference {d:.3e}")
    if d > 1e-5:
        sys.exit("FAILED: 2 ranks then 1 rank did not continue the same sample sequence")
    check_world_size_change_with_dropout(work)
    check_world_size_change_bitwise(work)
    check_mask_strategies_world_size_bitwise(work)


def two_ranks_then(work, name, opts):
    """2 ranks to step 20 straight, and from its step-10 checkpoint on 1 and on 3 ranks to step
    20, with `opts`: (the straight run's checkpoint, {ranks: the resumed run's}) at step 20."""
    straight = os.path.join(work, f"{name}_two_straight")
    shutil.rmtree(straight, ignore_errors=True)
    mpirun(2, pretrain_args(work, straight, **opts, **{"train.max_steps": 20}) + ["--resume", "none"])
    got = {}
    for ranks in (1, 3):
        run = os.path.join(work, f"{name}_two_then_{ranks}")
        shutil.rmtree(run, ignore_errors=True)
        shutil.copytree(os.path.join(straight, "step_00000010"), os.path.join(run, "step_00000010"))
        mpirun(ranks, pretrain_args(work, run, **opts, **{"train.max_steps": 20}) + ["--resume", "auto"])
        got[ranks] = checkpoint(run, 20)
    return checkpoint(straight, 20), got


def check_world_size_change_bitwise(work):
    """dist.reduce_dtype fp64 with a fixed micro-batch of 2 rows (global batch 12), dropout
    0.1: 2 ranks to step 10, resumed on 1 and on 3 ranks to step 20 (6, 3 and 2 micro-steps a
    rank), equal 2 ranks throughout BITWISE, weights and Adam moments: every micro-batch holds
    the same samples at every world size and their gradients are summed in float64, rounded
    once. The fp32 sums of check_world_size_change_with_dropout differ by the summation order."""
    opts = {"model.hidden_dropout": 0.1, "model.attention_dropout": 0.1, "data.global_batch_size": 12,
            "train.micro_batch_size": 2, "optimizer.lr": 1e-4, "dist.reduce_dtype": "fp64"}
    ref, resumed = two_ranks_then(work, "fp64", opts)
    for ranks, got in resumed.items():
        for part, x, y in (("weights", got[0], ref[0]), ("optimizer state", got[1], ref[1])):
            if x.keys() != y.keys():
                sys.exit(f"FAILED: {part} tensor names differ on {ranks} rank(s)")
            differ = [k for k in x if not np.array_equal(x[k], y[k])]
            if differ:
                sys.exit(f"FAILED: dist.reduce_dtype fp64, 2 ranks -> {ranks} rank(s) at step 10: {part} not bitwise "
                         f"equal to 2 ranks throughout at step 20 ({len(differ)} tensors differ, e.g. {differ[0]}: "
                         f"max relative difference {max_rel_diff({'t': x[differ[0]]}, {'t': y[differ[0]]}):.3e})")
        if got[2]["data_position"] != ref[2]["data_position"]:
            sys.exit(f"FAILED: data position {got[2]['data_position']} vs {ref[2]['data_position']}")
        print(f"dist.reduce_dtype fp64, dropout 0.1, 2 ranks -> {ranks} rank(s) at step 10: weights and Adam moments "
              f"at step 20 bitwise equal to 2 ranks throughout")


def check_mask_strategies_world_size_bitwise(work):
    """data.mask_strategy whole_word and span (masks read from configs/tiny.ini's vocabulary): the
    fp64 run of check_world_size_change_bitwise, 2 ranks to step 10 resumed on 1 and on 3 ranks,
    bitwise equal to 2 ranks throughout. Each rank counts only its own masked tokens (the step
    all-reduces the count), and the masks are a function of (seed, epoch, sample) alone. The
    strategy changes the run: its weights differ from the token run's."""
    opts = {"model.hidden_dropout": 0.1, "model.attention_dropout": 0.1, "data.global_batch_size": 12,
            "train.micro_batch_size": 2, "optimizer.lr": 1e-4, "dist.reduce_dtype": "fp64"}
    token = checkpoint(os.path.join(work, "fp64_two_straight"), 20)
    for strategy in ("whole_word", "span"):
        ref, resumed = two_ranks_then(work, strategy, {**opts, "data.mask_strategy": strategy})
        if all(np.array_equal(ref[0][k], token[0][k]) for k in ref[0]):
            sys.exit(f"FAILED: data.mask_strategy = {strategy} trained the same weights as token")
        if ref[2]["config"].get("data.mask_strategy") != strategy:
            sys.exit(f"FAILED: the checkpoint records data.mask_strategy = {ref[2]['config'].get('data.mask_strategy')}")
        for ranks, got in resumed.items():
            differ = [k for k in got[0] if not np.array_equal(got[0][k], ref[0][k])]
            differ += [k for k in got[1] if not np.array_equal(got[1][k], ref[1][k])]
            if differ or got[2]["data_position"] != ref[2]["data_position"]:
                sys.exit(f"FAILED: data.mask_strategy = {strategy}, 2 ranks -> {ranks} rank(s) at step 10: "
                         f"{len(differ)} tensors differ from 2 ranks throughout at step 20")
        print(f"data.mask_strategy = {strategy}: 2 ranks -> 1 and 3 ranks at step 10, weights and Adam moments at "
              "step 20 bitwise equal to 2 ranks throughout; other weights than token masks")


def check_world_size_change_with_dropout(work):
    """Dropout 0.1: 2 ranks to step 10, resumed on 1 and on 3 ranks to step 20, equal the run
    on 2 ranks throughout up to summation order. Dropout masks are keyed by (step, global
    sample), not by rank, so each world size draws the same masks for the same sample. The
    micro-batch is derived (6, 12 and 4 rows: one global batch of 12), so the split differs too."""
    opts = {"model.hidden_dropout": 0.1, "model.attention_dropout": 0.1, "data.global_batch_size": 12,
            "train.micro_batch_size": 0, "optimizer.lr": 1e-4}
    ref, resumed = two_ranks_then(work, "dropout", opts)
    for ranks, got in resumed.items():
        d = max_rel_diff(got[0], ref[0])
        print(f"dropout 0.1, 2 ranks -> {ranks} rank(s) at step 10: max relative weight difference at step 20 "
              f"to 2 ranks throughout = {d:.3e}")
        if got[2]["data_position"] != ref[2]["data_position"] or d > 1e-6:
            sys.exit(f"FAILED: with dropout, resuming on {ranks} rank(s) differs from 2 ranks throughout by {d:.3e} "
                     "(> 1e-6): dropout must not depend on the rank")


def check_build_records(ckpt):
    """The run started twice (10 steps, then resumed to 20): its metrics start with a start
    record per start, naming the step it started from and the build as `tupe --version` says,
    and every checkpoint's trainer_state.json records the same build."""
    want = version_facts()
    records = [json.loads(line) for line in open(os.path.join(ckpt, "metrics", "rank_0.jsonl"))]
    starts = [(i, r) for i, r in enumerate(records) if r.get("event") == "start"]
    if [r["step"] for _, r in starts] != [0, 10] or starts[0][0] != 0:
        sys.exit(f"FAILED: metrics start records {[(i, r.get('step')) for i, r in starts]}, expected the first "
                 "record at step 0 and one at the resume step 10")
    for _, r in starts:
        if r["build"] != want:
            sys.exit(f"FAILED: metrics start record build {r['build']} != tupe --version {want}")
    for step in (10, 20):
        state = json.load(open(os.path.join(ckpt, f"step_{step:08d}", "trainer_state.json")))
        if state.get("build") != want:
            sys.exit(f"FAILED: step {step} trainer_state.json build {state.get('build')} != tupe --version {want}")
    print(f"build recorded: {want['commit']}, LibTorch {want['libtorch']}, Open MPI {want['openmpi']}, HDF5 "
          f"{want['hdf5']}: in 2 start records and 2 checkpoints")


def check_learns(work):
    ck = os.path.join(work, "learns")
    shutil.rmtree(ck, ignore_errors=True)
    mpirun(2, pretrain_args(work, ck, **{"model.hidden_size": 64, "model.ffn_size": 256, "train.max_steps": 60,
                                          "optimizer.total_steps": 60, "data.global_batch_size": 16,
                                          "train.micro_batch_size": 8, "precision.precision": "bf16",
                                          "model.hidden_dropout": 0.1, "model.attention_dropout": 0.1,
                                          "data.validation_shards": f"{work}/../shards", "train.eval_every": 60,
                                          "train.eval_batches": 4}) + ["--resume", "none"])
    records = [json.loads(l) for l in open(os.path.join(ck, "metrics", "rank_0.jsonl"))]
    losses = [r["loss"] for r in records if "loss" in r]
    val = [r["validation_loss"] for r in records if "validation_loss" in r]
    first, last = np.mean(losses[:5]), np.mean(losses[-5:])
    print(f"MLM loss: first 5 steps {first:.3f}, last 5 steps {last:.3f}; validation {val}")
    if not last < first - 1.0:
        sys.exit(f"FAILED: loss did not fall clearly ({first:.3f} -> {last:.3f})")
    if not val or not val[-1] < first - 1.0:
        sys.exit(f"FAILED: validation loss {val} not clearly below the initial {first:.3f}")


def check_validation(work):
    ck = os.path.join(work, "validation")
    shutil.rmtree(ck, ignore_errors=True)
    # Micro-batches of 2 rows (2 accumulation steps a rank): evaluation takes whole batches.
    # 30 steps at LR 1e-2: enough for the model to name some masked tokens (accuracy above 0).
    mpirun(2, pretrain_args(work, ck, **{"train.max_steps": 30, "checkpoint.every_steps": 30,
                                          "optimizer.lr": 1e-2, "optimizer.total_steps": 30,
                                          "train.micro_batch_size": 2, "data.validation_shards": f"{work}/../shards",
                                          "train.eval_every": 30, "train.eval_batches": 5}) + ["--resume", "none"])
    records = [json.loads(l) for l in open(os.path.join(ck, "metrics", "rank_0.jsonl"))]
    logged = [r["validation_loss"] for r in records if "validation_loss" in r]
    accuracy = [r["validation_accuracy"] for r in records if "validation_loss" in r]
    if len(logged) != 1:
        sys.exit(f"FAILED: expected one validation record, got {logged}")
    p = subprocess.run([os.environ["TUPE_VALIDATION_REFERENCE"], os.path.join(ck, "step_00000030")],
                       capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        sys.exit(f"FAILED: validation_reference exit {p.returncode}: {p.stderr[-2000:]}")
    ref = json.loads(p.stdout)
    rel = abs(logged[0] - ref["validation_loss"]) / ref["validation_loss"]
    print(f"validation loss: job {logged[0]:.9f}, float64 recomputation {ref['validation_loss']:.9f} over "
          f"{ref['masked']} masked tokens in {ref['steps']} steps; relative difference {rel:.2e}")
    if not rel <= 1e-6:
        sys.exit(f"FAILED: the job's validation loss differs from the recomputation by {rel:.2e} (> 1e-6)")
    # Accuracy: the same tokens right, but for those the float64 logits call a near tie.
    diff_tokens = abs(accuracy[0] - ref["validation_accuracy"]) * ref["masked"]
    print(f"masked-token accuracy: job {accuracy[0]:.6f}, float64 recomputation {ref['validation_accuracy']:.6f} "
          f"({diff_tokens:.1f} tokens apart; near ties {ref['near_ties']})")
    if not (0 < ref["validation_accuracy"] < 1 and diff_tokens <= ref["near_ties"] + 1e-6):
        sys.exit(f"FAILED: the job's accuracy {accuracy[0]} is not the recomputation's {ref['validation_accuracy']}")
    # The attention kernels the run got: TUPE-R's bias needs a gradient, so CPU training takes
    # the explicit path; the same record in the metrics' start line and the checkpoint.
    state = json.load(open(os.path.join(ck, "step_00000030", "trainer_state.json")))
    start = next(r for r in records if r.get("event") == "start")
    kernels = state.get("attention_kernels", {})
    print(f"attention kernels: {kernels}")
    if not (kernels.get("training") == "explicit (CPU training path)" and kernels.get("evaluation")
            and start.get("attention_kernels") == kernels):
        sys.exit(f"FAILED: attention kernels {kernels} (start record: {start.get('attention_kernels')})")
    # tupe analyze by position: its buckets add up to the same tokens, loss and accuracy.
    out = os.path.join(work, "validation-analyze")
    # And by length: the same text cut at 64 and 256 tokens beside the run's 128.
    lengths = {}
    for n in (64, 256):
        lengths[n] = os.path.join(work, f"shards-{n}")
        mpirun(1, ["preprocess", "--config", os.path.join(SRC, "configs", "tiny.ini"),
                   "--input", os.path.join(DATA, "text", "wikitext-2", "wiki.test.raw"),
                   "--tokenizer.vocab", os.path.join(DATA, "vocab", "bert-base-uncased-vocab.txt"),
                   "--preprocess.max_seq_len", str(n), "--output", lengths[n], "--overwrite", "--quiet"])
    p = subprocess.run([os.environ["TUPE_BIN"], "analyze", "--checkpoint", os.path.join(ck, "step_00000030"),
                        "--validation-shards", f"{work}/../shards", "--eval-batches", "5", "--output", out,
                        "--length-shards", lengths[64], "--length-shards", f"{work}/../shards",
                        "--length-shards", lengths[256]],
                       capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        sys.exit(f"FAILED: tupe analyze --validation-shards exit {p.returncode}: {p.stderr[-2000:]}")
    rows = [line.split(",") for line in open(os.path.join(out, "mlm_by_position.csv")).read().split("\n")[1:] if line]
    buckets, total = [r for r in rows if r[0] != "all"], next(r for r in rows if r[0] == "all")
    masked = sum(int(r[3]) for r in buckets)
    loss = sum(int(r[3]) * float(r[4]) for r in buckets) / masked
    right = sum(int(r[3]) * float(r[5]) for r in buckets)
    print(f"by position: {len(buckets)} buckets, {masked} masked tokens, loss {loss:.9f}, accuracy {right / masked:.6f}; "
          f"all: {total[3:]}")
    if not (masked == ref["masked"] == int(total[3]) and abs(loss - ref["validation_loss"]) / ref["validation_loss"] <= 1e-6
            and abs(right - ref["validation_accuracy"] * masked) <= ref["near_ties"] + 1e-3 and len(buckets) >= 3
            and "| positions | masked | loss | accuracy |" in p.stdout):
        sys.exit(f"FAILED: the buckets of tupe analyze do not add up to the recomputation's {ref}")
    import csv
    by_length = list(csv.DictReader(open(os.path.join(out, "mlm_by_length.csv"))))
    print(f"by length: {[(r['max_seq_len'], r['masked'], r['loss'], r['accuracy'], r['note'][:40]) for r in by_length]}")
    short, same, long = by_length
    if not (int(short["max_seq_len"]) <= 64 and int(short["masked"]) > 0 and 0 < float(short["loss"]) < 20
            and int(same["masked"]) == ref["masked"]
            and abs(float(same["loss"]) - ref["validation_loss"]) <= 1e-6 * ref["validation_loss"]
            and int(long["max_seq_len"]) > 128 and long["masked"] == "0" and not long["loss"]
            and f"not scored: sequences of up to {long['max_seq_len']} tokens, the model has 128 positions" in long["note"]):
        sys.exit(f"FAILED: mlm_by_length.csv: {by_length}")
    # A RoPE model computes its positions for any length: the 256-token text is scored past its
    # 128 positions (a finite loss, every masked token), not refused.
    ck_rope = os.path.join(work, "validation-rope")
    shutil.rmtree(ck_rope, ignore_errors=True)
    mpirun(1, pretrain_args(work, ck_rope, **{"model.position_encoding": "rope", "model.untie_cls": "false",
                                              "optimizer.total_steps": 10, "checkpoint.every_steps": 10}))
    out_rope = os.path.join(work, "validation-analyze-rope")
    p = subprocess.run([os.environ["TUPE_BIN"], "analyze", "--checkpoint", os.path.join(ck_rope, "step_00000010"),
                        "--output", out_rope, "--eval-batches", "3", "--length-shards", lengths[256]],
                       capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        sys.exit(f"FAILED: tupe analyze of the RoPE run exit {p.returncode}: {p.stderr[-2000:]}")
    (row,) = list(csv.DictReader(open(os.path.join(out_rope, "mlm_by_length.csv"))))
    print(f"RoPE at 256 tokens: {row}")
    if not (int(row["max_seq_len"]) > 128 and int(row["masked"]) > 0 and 0 < float(row["loss"]) < 20 and not row["note"]):
        sys.exit(f"FAILED: the RoPE model was not scored past its 128 positions: {row}")
    print("validation OK")


if __name__ == "__main__":
    check, work = sys.argv[1], os.path.abspath(sys.argv[2])
    os.makedirs(work, exist_ok=True)
    found = [m for m in (sys.modules[__name__], pretrain_fault_checks, pretrain_output_checks)
             if hasattr(m, "check_" + check)]
    if not found:
        sys.exit(f"pretrain_checks.py: no check named '{check}' (see the usage at the top of the file)")
    getattr(found[0], "check_" + check)(work)
