"""Trajectory parity of tupe's pre-training step with Hugging Face, in float64.

tupe's side (trajectory_fixture): a tiny BERT-A from tupe's own initialiser, trained for 300
steps by tupe's training step (trainer::TrainStep: AdamW, warm-up + linear decay, weight decay
groups, clipping) on batches of tupe's own loader with its dynamic masking, over shards that
`tupe preprocess` made from WikiText-2. It writes its initial weights under BertForMaskedLM
names, every batch it trained on, its per-step loss and its final weights.

Hugging Face's side (here): transformers' BertForMaskedLM in float64 (eager attention,
dropout 0) from those initial weights, trained on the same batches by a plain PyTorch loop:
torch.optim.AdamW with the usual BERT groups (no decay for biases and LayerNorm weights),
torch.nn.utils.clip_grad_norm_, and the LR schedule written here from the formula of
trainer/lr_schedule.h (update k uses lr(k): peak k / W in warm-up, then
peak (T - k) / (T - W)); the loss is transformers' MLM cross-entropy, the mean over the
masked tokens of the batch. The token-type embedding (tupe's BERT-A has none; BERT's one
row is zero) is frozen.

tupe runs twice, both times the job's own step (pretrain::run_mlm_step on trainer::TrainStep):
precision=fp64 (the model cast to float64) and precision=fp32. Both start from the same weights and see the
same batches (checked), so one float64 run of transformers is the reference for both.

Assertions:
  float64: every step's loss within LOSS_TOL, the final weights within WEIGHT_TOL;
  float32: the same within FP32_FACTOR x the drift of transformers' own float32 run from its
           float64 run on the same batches (measured here, each time);
  each mutation of the reference fails both comparisons:
    schedule  transformers' get_linear_schedule_with_warmup (update k uses lr(k - 1), so the
              first update has LR 0): one step off from tupe's schedule
    decay     weight decay on every parameter (biases and LayerNorm weights too)
    clip      no gradient clipping
A second float64 run gives both models a token-type table of 2 rows (tupe's segment table, row
0 added to every token and trained, as BertForMaskedLM does by default) for SEGMENT_STEPS
steps: the same tolerances, and freezing that row on transformers' side (the model difference
the first convergence benchmark had) must fail them.

Usage: trajectory_checks.py test WORKDIR      preprocess, both fixture runs, reference, mutations
       trajectory_checks.py measure WORKDIR   (after test) every variant over all steps: figures
Environment: TUPE_BIN, TUPE_SOURCE_DIR, TUPE_SHARED_DATA, TUPE_TRAJECTORY_FIXTURE.
"""
import argparse
import json
import os
import subprocess
import sys
import time

import torch
import torch.nn.functional as F
from safetensors.torch import load_file
from transformers import BertConfig, BertForMaskedLM
from transformers import get_linear_schedule_with_warmup

SRC = os.environ.get("TUPE_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
DATA = os.environ.get("TUPE_SHARED_DATA", os.path.join(SRC, "..", "shared", "data"))
MUTATIONS = ("schedule", "decay", "clip")
SEGMENT_STEPS = 100  # the run with a trained token-type table (type_vocab=2)

# Tolerances (float64; derivation in bench/RESULTS.md "Trajectory parity with Hugging Face").
LOSS_TOL = 1e-10    # float64: |loss_tupe - loss_hf| / loss_hf, every step
WEIGHT_TOL = 1e-8   # float64, per tensor: max |w_tupe - w_hf| / max(max |w_hf|, 1e-2), final weights
FP32_FACTOR = 10    # float32: 10x the measured drift of transformers' fp32 run from its fp64 run


def fail(msg):
    sys.exit(f"FAILED: {msg}")


def run(cmd, timeout=900):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        fail(f"{' '.join(cmd)}\nexit {p.returncode}\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    return p.stdout


def make_shards(work):
    """WikiText-2 (test split, raw) through `tupe preprocess` with configs/tiny.ini (L = 128)."""
    out = os.path.join(work, "shards")
    run([os.environ["TUPE_BIN"], "preprocess", "--config", os.path.join(SRC, "configs", "tiny.ini"),
         "--input", os.path.join(DATA, "text", "wikitext-2", "wiki.test.raw"),
         "--tokenizer.vocab", os.path.join(DATA, "vocab", "bert-base-uncased-vocab.txt"),
         "--output", out, "--overwrite", "--quiet"])
    return out


def run_fixture(work, shards, precision, *extra, name=None):
    out = os.path.join(work, name or f"tupe_{precision}")
    t0 = time.time()
    print(run([os.environ["TUPE_TRAJECTORY_FIXTURE"], shards, out, f"precision={precision}", *extra]).strip())
    print(f"tupe side ({precision}): {time.time() - t0:.1f} s")
    return out


def tupe_lr(k, peak, warmup, total):
    """LR of update k (1-based), trainer/lr_schedule.h's formula, linear decay."""
    if k <= warmup:
        return peak * k / warmup
    if k < total:
        return peak * (total - k) / (total - warmup)
    return 0.0


def build_model(cfg, step0, freeze_type=False):
    """BertForMaskedLM in float64 with tupe's step-0 weights. The token-type table is tupe's
    segment table when the fixture had one (trained unless freeze_type), else BERT's one zero
    row, frozen."""
    type_vocab = int(cfg.get("type_vocab", "0"))
    bc = BertConfig(vocab_size=cfg["vocab_size"], hidden_size=int(cfg["hidden"]),
                    num_hidden_layers=int(cfg["layers"]), num_attention_heads=int(cfg["heads"]),
                    intermediate_size=int(cfg["ffn"]), hidden_act="gelu", hidden_dropout_prob=0.0,
                    attention_probs_dropout_prob=0.0, max_position_embeddings=cfg["max_positions"],
                    type_vocab_size=max(type_vocab, 1), layer_norm_eps=cfg["layer_norm_eps"], pad_token_id=0,
                    tie_word_embeddings=True, attn_implementation="eager")
    model = BertForMaskedLM(bc).to(torch.float64)
    sd = load_file(step0)
    missing, unexpected = model.load_state_dict(sd, strict=False)
    tied = {"cls.predictions.decoder.weight", "cls.predictions.decoder.bias"}
    if unexpected or not set(missing) <= tied:
        fail(f"step-0 weights do not fit BertForMaskedLM: missing {missing}, unexpected {unexpected}")
    p = model.cls.predictions
    if p.decoder.weight.data_ptr() != model.bert.embeddings.word_embeddings.weight.data_ptr():
        fail("the MLM decoder is not tied to the word embedding")
    for name, t in model.state_dict().items():
        if name in sd and not torch.equal(t, sd[name]):
            fail(f"{name}: not loaded")
    if type_vocab == 0 or freeze_type:
        model.bert.embeddings.token_type_embeddings.weight.requires_grad_(False)
    model.train()
    return model


def mlm_loss(model, ids, mask, positions, labels):
    """Mean CE over the masked tokens, through BertForMaskedLM's encoder and MLM head; the head
    runs on the masked positions only (it is position-wise, so this is its full output there)."""
    hidden = model.bert(input_ids=ids, attention_mask=mask, token_type_ids=torch.zeros_like(ids)).last_hidden_state
    logits = model.cls(hidden.reshape(-1, hidden.size(-1)).index_select(0, positions))
    return F.cross_entropy(logits, labels, reduction="sum") / labels.numel()


def hf_loss_full(model, ids, mask, positions, labels):
    """transformers' own MLM loss: labels -100 outside the masked positions."""
    full = torch.full((ids.numel(),), -100, dtype=torch.long)
    full[positions] = labels
    return model(input_ids=ids, attention_mask=mask, token_type_ids=torch.zeros_like(ids),
                 labels=full.view_as(ids)).loss


def train_hf(tupe_dir, mutate=None, dtype=torch.float64, stop=None):
    """Trains BertForMaskedLM on the batches tupe trained on (tupe_dir). Returns (per-step
    losses, final state dict, steps clipped). stop(t, loss): True ends the run after step t."""
    traj = json.load(open(os.path.join(tupe_dir, "trajectory.json")))
    cfg, steps = traj["config"], traj["steps"]
    peak, warmup, total = float(cfg["lr"]), int(cfg["warmup"]), int(cfg["total"])
    clip, wd = float(cfg["clip"]), float(cfg["weight_decay"])
    model = build_model(cfg, os.path.join(tupe_dir, "step0.safetensors"), freeze_type=mutate == "freeze_type").to(dtype)
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    no_decay = lambda n: n.endswith("bias") or "LayerNorm" in n  # noqa: E731
    mine = {n: not no_decay(n) for n, _ in named}
    if mine != traj["decay"] and mutate != "freeze_type":
        fail(f"decay groups differ from tupe's: {sorted(k for k in mine if mine[k] != traj['decay'].get(k))}")
    if mutate == "decay":
        groups = [{"params": [p for _, p in named], "weight_decay": wd}]
    else:
        groups = [{"params": [p for n, p in named if not no_decay(n)], "weight_decay": wd},
                  {"params": [p for n, p in named if no_decay(n)], "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=peak, betas=(float(cfg["beta1"]), float(cfg["beta2"])), eps=float(cfg["eps"]),
                            fused=True)
    if mutate == "schedule":
        sched = get_linear_schedule_with_warmup(opt, warmup, total)
    else:
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: tupe_lr(s + 1, peak, warmup, total) / peak)
    params = [p for _, p in named]
    batches = load_file(os.path.join(tupe_dir, "batches.safetensors"))
    losses, clipped = [], 0
    for rec in steps:
        t = rec["step"]
        ids, mask = batches[f"{t}/input_ids"], batches[f"{t}/attention_mask"]
        pos, lab = batches[f"{t}/masked_positions"], batches[f"{t}/masked_labels"]
        if lab.numel() != rec["masked"]:
            fail(f"step {t}: {lab.numel()} masked labels but tupe counted {rec['masked']}")
        opt.zero_grad(set_to_none=True)
        loss = mlm_loss(model, ids, mask, pos, lab)
        if t == 1:  # the loss above is transformers' own MLM loss
            full = hf_loss_full(model, ids, mask, pos, lab).item()
            if abs(full - loss.item()) > 1e-12 * abs(full) * (1 if dtype == torch.float64 else 1e8):
                fail(f"step 1: BertForMaskedLM's loss {full!r} != the masked-position loss {loss.item()!r}")
        loss.backward()
        if mutate != "clip":
            n = torch.nn.utils.clip_grad_norm_(params, clip)
            clipped += int(n.item() > clip)
        opt.step()
        sched.step()
        losses.append(loss.item())
        if stop is not None and stop(t, loss.item()):
            break
    return losses, {k: v.detach().to(torch.float64) for k, v in model.state_dict().items()}, clipped


def loss_diffs(a, b):
    """Per-step |a - b| / |b| over the steps both have."""
    return [abs(x - y) / abs(y) for x, y in zip(a, b)]


def weight_diff(a, b):
    """(worst, name): per tensor max |a - b| / max(max |b|, 1e-2) over a's tensors; the floor
    compares tensors that stay near 0 (LayerNorm biases early on) at that absolute scale."""
    worst, worst_name = 0.0, ""
    for name, x in a.items():
        w = b[name]
        r = float((x.to(torch.float64) - w.to(torch.float64)).abs().max() / max(float(w.abs().max()), 1e-2))
        if r > worst:
            worst, worst_name = r, name
    return worst, worst_name


def tupe_run(tupe_dir):
    """tupe's per-step losses and final weights."""
    steps = json.load(open(os.path.join(tupe_dir, "trajectory.json")))["steps"]
    return [r["loss"] for r in steps], load_file(os.path.join(tupe_dir, "final.safetensors"))


def same_inputs(dir_a, dir_b):
    """Both fixture runs start from the same weights and train on the same batches."""
    for f in ("step0.safetensors", "batches.safetensors"):
        a, b = load_file(os.path.join(dir_a, f)), load_file(os.path.join(dir_b, f))
        if a.keys() != b.keys() or any(not torch.equal(a[k], b[k]) for k in a):
            fail(f"{f}: the fp64 and fp32 runs differ")


def check_within(label, diffs, weights, loss_tol, weight_tol):
    """Prints the comparison and fails when the per-step loss or the final weights exceed the tolerances."""
    summary(label, diffs, weights)
    if max(diffs) > loss_tol:
        fail(f"{label}: step {diffs.index(max(diffs)) + 1}: loss differs by {max(diffs):.3e} relative (> {loss_tol:.3e})")
    if weights[0] > weight_tol:
        fail(f"{label}: final weights differ: {weights[1]} by {weights[0]:.3e} relative (> {weight_tol:.3e})")


def summary(label, diffs, weights):
    first = f"{max(diffs):.3e} (step {diffs.index(max(diffs)) + 1} of {len(diffs)})"
    w = f"final weights {weights[0]:.3e} ({weights[1]})" if weights else "final weights: stopped early"
    print(f"{label}: max per-step loss rel diff {first}; {w}")


def check_test(work):
    os.makedirs(work, exist_ok=True)
    shards = make_shards(work)
    t64, t32 = run_fixture(work, shards, "fp64"), run_fixture(work, shards, "fp32")
    same_inputs(t64, t32)
    loss64, final64 = tupe_run(t64)
    loss32, final32 = tupe_run(t32)
    if len(loss64) < 300:
        fail(f"only {len(loss64)} steps")

    # float64: tupe vs transformers.
    t0 = time.time()
    hf_loss, hf_final, clipped = train_hf(t64)
    print(f"HF float64 reference: {time.time() - t0:.1f} s, {clipped} of {len(hf_loss)} steps clipped")
    check_within("tupe fp64 vs HF fp64", loss_diffs(loss64, hf_loss), weight_diff(final64, hf_final),
                 LOSS_TOL, WEIGHT_TOL)
    if clipped == 0:
        fail("no step was clipped: the clip mutation would test nothing")

    # float32 (tupe's real TrainStep): the tolerance is 10x the drift of transformers' own
    # float32 run from its float64 run on the same batches.
    t0 = time.time()
    hf32_loss, hf32_final, _ = train_hf(t64, dtype=torch.float32)
    print(f"HF float32 run: {time.time() - t0:.1f} s")
    drift_l, drift_w = max(loss_diffs(hf32_loss, hf_loss)), weight_diff(hf32_final, hf_final)
    tol32_l, tol32_w = FP32_FACTOR * drift_l, FP32_FACTOR * drift_w[0]
    print(f"HF fp32 vs HF fp64 (drift): loss {drift_l:.3e}, final weights {drift_w[0]:.3e} ({drift_w[1]}); "
          f"fp32 tolerances {tol32_l:.3e}, {tol32_w:.3e}")
    check_within("tupe fp32 (TrainStep) vs HF fp64", loss_diffs(loss32, hf_loss), weight_diff(final32, hf_final),
                 tol32_l, tol32_w)

    # Mutations: each must fail both comparisons (run until it does).
    for m in MUTATIONS:
        t0 = time.time()
        seen = {}

        def stop(t, loss):
            for key, ref, tol in (("fp64", loss64, LOSS_TOL), ("fp32", loss32, tol32_l)):
                if key not in seen and abs(ref[t - 1] - loss) / abs(loss) > tol:
                    seen[key] = t
            return len(seen) == 2

        mloss, mfinal, _ = train_hf(t64, mutate=m, stop=stop)
        complete = len(mloss) == len(loss64)
        wd64 = weight_diff(final64, mfinal)[0] if complete else None
        wd32 = weight_diff(final32, mfinal)[0] if complete else None
        print(f"mutation {m}: loss over tolerance from step {seen.get('fp64')} (fp64), {seen.get('fp32')} (fp32)"
              + (f"; final weights {wd64:.3e} (fp64), {wd32:.3e} (fp32)" if complete else "") +
              f"; {time.time() - t0:.1f} s")
        if "fp64" not in seen and wd64 <= WEIGHT_TOL:
            fail(f"mutation {m} passes the float64 comparison: the test cannot see it")
        if "fp32" not in seen and wd32 <= tol32_w:
            fail(f"mutation {m} passes the float32 comparison: the test cannot see it")
    check_segments(work, shards)
    print("trajectory parity OK; every mutation fails it")


def check_segments(work, shards):
    """float64, both models with a trained 2-row token-type table; the frozen row must fail."""
    seg = run_fixture(work, shards, "fp64", "type_vocab=2", f"steps={SEGMENT_STEPS}", name="tupe_fp64_segments")
    loss, final = tupe_run(seg)
    if "bert.embeddings.token_type_embeddings.weight" not in final or \
            final["bert.embeddings.token_type_embeddings.weight"].shape[0] != 2:
        fail("the segment run has no 2-row token-type table")
    hf_loss, hf_final, _ = train_hf(seg)
    check_within("tupe fp64 vs HF fp64, token-type table trained", loss_diffs(loss, hf_loss),
                 weight_diff(final, hf_final), LOSS_TOL, WEIGHT_TOL)
    frozen_loss, frozen_final, _ = train_hf(seg, mutate="freeze_type")
    fd, fw = loss_diffs(loss, frozen_loss), weight_diff(final, frozen_final)
    summary("mutation freeze_type vs tupe fp64 (segments)", fd, fw)
    if max(fd) <= LOSS_TOL and fw[0] <= WEIGHT_TOL:
        fail("mutation freeze_type passes the segment comparison: the test cannot see it")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["test", "measure"])
    ap.add_argument("work")
    a = ap.parse_args()
    torch.set_num_threads(1)
    if a.mode == "test":
        return check_test(a.work)
    # measure: after a test run in WORK, every variant over all steps.
    t64, t32 = os.path.join(a.work, "tupe_fp64"), os.path.join(a.work, "tupe_fp32")
    loss64, final64 = tupe_run(t64)
    loss32, final32 = tupe_run(t32)
    hf_loss, hf_final, clipped = train_hf(t64)
    print(f"{clipped} of {len(hf_loss)} steps clipped")
    summary("tupe fp64 vs HF fp64", loss_diffs(loss64, hf_loss), weight_diff(final64, hf_final))
    summary("tupe fp32 vs HF fp64", loss_diffs(loss32, hf_loss), weight_diff(final32, hf_final))
    hf32_loss, hf32_final, _ = train_hf(t64, dtype=torch.float32)
    summary("HF fp32 vs HF fp64", loss_diffs(hf32_loss, hf_loss), weight_diff(hf32_final, hf_final))
    for m in MUTATIONS:
        mloss, mfinal, _ = train_hf(t64, mutate=m)
        summary(f"mutation {m} vs tupe fp64", loss_diffs(loss64, mloss), weight_diff(final64, mfinal))
        summary(f"mutation {m} vs tupe fp32", loss_diffs(loss32, mloss), weight_diff(final32, mfinal))


if __name__ == "__main__":
    main()
