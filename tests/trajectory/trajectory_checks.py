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

Assertions: every step's loss and the final weights agree within the tolerances below; and
each mutation of the reference fails the same comparison:
  schedule  transformers' get_linear_schedule_with_warmup (update k uses lr(k - 1), so the
            first update has LR 0): one step off from tupe's schedule
  decay     weight decay on every parameter (biases and LayerNorm weights too)
  clip      no gradient clipping

Usage: trajectory_checks.py test WORKDIR
           preprocess, run the fixture, the reference and every mutation; assert
       trajectory_checks.py measure WORKDIR [--norm-fp32] [--clip C]
           (after a test run, or fresh) every variant over all steps, figures only
       trajectory_checks.py reference WORKDIR [--mutate NAME] [--norm-fp32]
           one reference run against WORKDIR/tupe, figures only
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

# Tolerances (float64; derivation in bench/RESULTS.md "Trajectory parity with Hugging Face").
LOSS_TOL = 1e-9     # |loss_tupe - loss_hf| / loss_hf, every step
WEIGHT_TOL = 1e-7   # per tensor: max |w_tupe - w_hf| / max(max |w_hf|, 1e-2), final weights


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


def run_fixture(work, shards, extra=()):
    out = os.path.join(work, "tupe")
    t0 = time.time()
    print(run([os.environ["TUPE_TRAJECTORY_FIXTURE"], shards, out, *extra]).strip())
    print(f"tupe side: {time.time() - t0:.1f} s")
    return out


def tupe_lr(k, peak, warmup, total):
    """LR of update k (1-based), trainer/lr_schedule.h's formula, linear decay."""
    if k <= warmup:
        return peak * k / warmup
    if k < total:
        return peak * (total - k) / (total - warmup)
    return 0.0


def build_model(cfg, step0):
    """BertForMaskedLM in float64 with tupe's step-0 weights; the token-type row frozen."""
    bc = BertConfig(vocab_size=cfg["vocab_size"], hidden_size=int(cfg["hidden"]),
                    num_hidden_layers=int(cfg["layers"]), num_attention_heads=int(cfg["heads"]),
                    intermediate_size=int(cfg["ffn"]), hidden_act="gelu", hidden_dropout_prob=0.0,
                    attention_probs_dropout_prob=0.0, max_position_embeddings=cfg["max_positions"],
                    type_vocab_size=1, layer_norm_eps=cfg["layer_norm_eps"], pad_token_id=0,
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


def clip_fp32_norm(params, max_norm):
    """tupe's clip (trainer/optimizer_step.cpp): the norm accumulated in float32."""
    g = torch.cat([p.grad.reshape(-1) for p in params])
    n = torch.linalg.vector_norm(g, 2, dtype=torch.float32)
    c = torch.where(n > max_norm, torch.clamp(max_norm / (n + 1e-6), max=1.0), torch.ones_like(n))
    for p in params:
        p.grad.mul_(c)


def reference(tupe_dir, mutate=None, norm_fp32=False, stop_early=False):
    """Trains BertForMaskedLM on tupe's batches; returns (per-step loss rel diffs, final weight
    diff or None when stopped early, first failing step or None)."""
    traj = json.load(open(os.path.join(tupe_dir, "trajectory.json")))
    cfg, steps = traj["config"], traj["steps"]
    peak, warmup, total = float(cfg["lr"]), int(cfg["warmup"]), int(cfg["total"])
    clip, wd = float(cfg["clip"]), float(cfg["weight_decay"])
    model = build_model(cfg, os.path.join(tupe_dir, "step0.safetensors"))
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    no_decay = lambda n: n.endswith("bias") or "LayerNorm" in n  # noqa: E731
    mine = {n: not no_decay(n) for n, _ in named}
    if mine != traj["decay"]:
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
    diffs, first_bad, clipped = [], None, 0
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
            if abs(full - loss.item()) > 1e-12 * abs(full):
                fail(f"step 1: BertForMaskedLM's loss {full!r} != the masked-position loss {loss.item()!r}")
        loss.backward()
        if mutate != "clip":
            if norm_fp32:
                clip_fp32_norm(params, clip)
            else:
                n = torch.nn.utils.clip_grad_norm_(params, clip)
                clipped += int(n.item() > clip)
        opt.step()
        sched.step()
        d = abs(rec["loss"] - loss.item()) / abs(loss.item())
        diffs.append(d)
        if d > LOSS_TOL and first_bad is None:
            first_bad = t
            if stop_early:
                return diffs, None, first_bad, clipped
    final = load_file(os.path.join(tupe_dir, "final.safetensors"))
    worst, worst_name = 0.0, ""
    for name, p in model.state_dict().items():
        if name not in final:
            continue
        w = final[name]
        r = float((p - w).abs().max() / max(float(w.abs().max()), 1e-2))
        if r > worst:
            worst, worst_name = r, name
    return diffs, (worst, worst_name), first_bad, clipped


def report(label, diffs, weights, first_bad, clipped, seconds):
    w = f"final weights {weights[0]:.3e} ({weights[1]})" if weights else "stopped early"
    print(f"{label}: {len(diffs)} steps, max loss rel diff {max(diffs):.3e}, "
          f"first step over {LOSS_TOL:g}: {first_bad}; {w}; {clipped} clipped steps; {seconds:.1f} s")


def check_test(work):
    os.makedirs(work, exist_ok=True)
    tupe_dir = run_fixture(work, make_shards(work))
    steps = json.load(open(os.path.join(tupe_dir, "trajectory.json")))["steps"]
    if len(steps) < 300:
        fail(f"only {len(steps)} steps")
    t0 = time.time()
    diffs, weights, first_bad, clipped = reference(tupe_dir)
    report("reference", diffs, weights, first_bad, clipped, time.time() - t0)
    if first_bad is not None:
        fail(f"step {first_bad}: loss differs by {diffs[first_bad - 1]:.3e} relative (> {LOSS_TOL:g})")
    if weights[0] > WEIGHT_TOL:
        fail(f"final weights differ: {weights[1]} by {weights[0]:.3e} relative (> {WEIGHT_TOL:g})")
    if clipped == 0:
        fail("no step was clipped: the clip mutation would test nothing")
    for m in MUTATIONS:
        t0 = time.time()
        diffs, weights, first_bad, clipped = reference(tupe_dir, mutate=m, stop_early=True)
        report(f"mutation {m}", diffs, weights, first_bad, clipped, time.time() - t0)
        if first_bad is None and weights[0] <= WEIGHT_TOL:
            fail(f"mutation {m} passes the comparison: the test cannot see it")
    print("trajectory parity OK; every mutation fails it")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["test", "measure", "reference"])
    ap.add_argument("work")
    ap.add_argument("--mutate", choices=MUTATIONS)
    ap.add_argument("--norm-fp32", action="store_true", help="clip with tupe's float32 norm (diagnostic)")
    ap.add_argument("--fixture-arg", action="append", default=[], help="key=value for trajectory_fixture")
    a = ap.parse_args()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    if a.mode == "test":
        return check_test(a.work)
    tupe_dir = os.path.join(a.work, "tupe")
    if a.mode == "measure":
        os.makedirs(a.work, exist_ok=True)
        tupe_dir = run_fixture(a.work, make_shards(a.work), a.fixture_arg)
        variants = [(None, False), (None, True)] + [(m, False) for m in MUTATIONS]
    else:
        variants = [(a.mutate, a.norm_fp32)]
    for m, nf in variants:
        t0 = time.time()
        diffs, weights, first_bad, clipped = reference(tupe_dir, mutate=m, norm_fp32=nf)
        report(f"{m or 'reference'}{' (fp32 norm)' if nf else ''}", diffs, weights, first_bad, clipped,
               time.time() - t0)


if __name__ == "__main__":
    main()
