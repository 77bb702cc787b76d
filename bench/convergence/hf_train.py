"""The Hugging Face side of the convergence benchmark: BertForMaskedLM with transformers' own
initialisation, trained by a plain PyTorch loop on the sequences of tupe's train shards
(read with h5py), masked by transformers' DataCollatorForLanguageModeling (15%, 80/10/10),
with torch AdamW (no decay on biases and LayerNorm weights, the usual recipe), transformers'
linear warm-up + decay schedule and gradient clipping. Dropout as configured (0.1).

Resumable: a checkpoint (model, optimizer, scheduler, RNG states, step) is written at every
evaluation step; a rerun continues from the newest and skips finished work.

Writes into --out: metrics.jsonl ({"step", "loss", "lr", "tokens_per_s"} every --log-every
steps; {"step", "validation_loss", "train_s"} at every evaluation step, train_s the seconds
of training up to that step: the loop's wall-clock less evaluation and checkpoint writes,
carried across resumes) and done.json at the end.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time

import torch
from transformers import (BertConfig, BertForMaskedLM, BertTokenizer, DataCollatorForLanguageModeling,
                          get_linear_schedule_with_warmup)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mlm_data  # noqa: E402


def parse() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shards", required=True, help="folder of tupe train shards")
    ap.add_argument("--validation", required=True, help="folder of tupe validation shards")
    ap.add_argument("--vocab", required=True, help="the WordPiece vocab.txt the shards were made with")
    ap.add_argument("--out", required=True)
    for k, v in (("hidden", 128), ("layers", 2), ("heads", 2), ("ffn", 512), ("max-positions", 128), ("batch", 32),
                 ("steps", 1000), ("warmup", 100), ("seed", 1), ("threads", 2), ("log-every", 10),
                 ("eval-batch", 64), ("eval-seed", 20261201)):
        ap.add_argument(f"--{k}", type=int, default=v)
    ap.add_argument("--eval-steps", required=True, help="comma-separated steps at which to evaluate")
    ap.add_argument("--max-steps", type=int, default=0, help="stop after this step (0: --steps); the schedule "
                    "still spans --steps, as tupe's train.max_steps")
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--weight-decay", type=float, default=0.01)
    ap.add_argument("--dropout", type=float, default=0.1)
    ap.add_argument("--layer-norm-eps", type=float, default=1e-12)
    return ap.parse_args()


def main() -> None:
    a = parse()
    os.makedirs(a.out, exist_ok=True)
    if os.path.exists(os.path.join(a.out, "done.json")):
        print(f"{a.out}: done")
        return
    torch.set_num_threads(a.threads)
    eval_steps = sorted({int(s) for s in a.eval_steps.split(",")})
    train, sp = mlm_data.read_sequences(a.shards, "train")
    val = mlm_data.fixed_validation_batches(a.validation, a.eval_batch, a.eval_seed,
                                            cache=os.path.join(a.out, "..", "validation-batches.pt"))
    tok = BertTokenizer(vocab=a.vocab, do_lower_case=True)  # transformers 5: `vocab`, not `vocab_file`
    if (len(tok), tok.pad_token_id, tok.mask_token_id) != (sp["vocab_size"], sp["pad"], sp["mask"]):
        raise SystemExit(f"{a.vocab}: {len(tok)} entries, [PAD] {tok.pad_token_id}, [MASK] {tok.mask_token_id}; "
                         f"the shards say {sp['vocab_size']}, {sp['pad']}, {sp['mask']}")
    collator = DataCollatorForLanguageModeling(tokenizer=tok, mlm=True, mlm_probability=0.15, return_tensors="pt")

    torch.manual_seed(a.seed)
    cfg = BertConfig(vocab_size=sp["vocab_size"], hidden_size=a.hidden, num_hidden_layers=a.layers,
                     num_attention_heads=a.heads, intermediate_size=a.ffn, max_position_embeddings=a.max_positions,
                     hidden_dropout_prob=a.dropout, attention_probs_dropout_prob=a.dropout,
                     layer_norm_eps=a.layer_norm_eps, pad_token_id=sp["pad"])
    model = BertForMaskedLM(cfg).train()
    no_decay = [p for n, p in model.named_parameters() if n.endswith("bias") or "LayerNorm" in n]
    decay = [p for n, p in model.named_parameters() if not (n.endswith("bias") or "LayerNorm" in n)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": a.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}], lr=a.lr, betas=(0.9, 0.999), eps=1e-6)
    sched = get_linear_schedule_with_warmup(opt, a.warmup, a.steps)
    order_gen = torch.Generator().manual_seed(a.seed)
    step, epoch, cursor, order = 0, 0, 0, None
    train_s = 0.0  # seconds of training so far (bench/time_to_quality.sh reads it)

    ckpt = os.path.join(a.out, "checkpoint.pt")
    if os.path.exists(ckpt):
        s = torch.load(ckpt, weights_only=False)
        model.load_state_dict(s["model"])
        opt.load_state_dict(s["optimizer"])
        sched.load_state_dict(s["scheduler"])
        torch.set_rng_state(s["rng"])
        order_gen.set_state(s["order_rng"])
        step, epoch, cursor, order = s["step"], s["epoch"], s["cursor"], s["order"]
        train_s = s.get("train_s", 0.0)
        print(f"{a.out}: resumed at step {step}")
    metrics = open(os.path.join(a.out, "metrics.jsonl"), "a")

    def record(obj: dict) -> None:
        metrics.write(json.dumps(obj) + "\n")
        metrics.flush()

    window_t, window_tokens, loss_acc, loss_n = time.perf_counter(), 0, 0.0, 0
    lap = window_t  # start of the training time not yet added to train_s
    last = a.max_steps if a.max_steps > 0 else a.steps
    while step < last:
        if order is None or cursor + a.batch > len(order):  # a new epoch: drop the incomplete tail
            order = torch.randperm(len(train), generator=order_gen).tolist()
            epoch, cursor = epoch + 1, 0
        rows = order[cursor:cursor + a.batch]
        cursor += a.batch
        batch = collator([{"input_ids": train[i].tolist()} for i in rows])
        attn = (batch["input_ids"] != sp["pad"]).long()
        loss = model(input_ids=batch["input_ids"], attention_mask=attn, labels=batch["labels"]).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        lr = sched.get_last_lr()[0]
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        step += 1
        window_tokens += int(attn.numel())
        loss_acc, loss_n = loss_acc + loss.item(), loss_n + 1
        if step % a.log_every == 0:
            dt = time.perf_counter() - window_t
            record({"step": step, "loss": loss_acc / loss_n, "lr": lr, "tokens_per_s": window_tokens / dt})
            window_t, window_tokens, loss_acc, loss_n = time.perf_counter(), 0, 0.0, 0
        if step in eval_steps:
            t = time.perf_counter()
            train_s += t - lap
            v = mlm_data.masked_lm_loss(model, val)
            record({"step": step, "validation_loss": v, "train_s": train_s})
            print(f"{a.out}: step {step} validation loss {v:.4f} (ppl {math.exp(v):.1f})", flush=True)
            torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "scheduler": sched.state_dict(),
                        "rng": torch.get_rng_state(), "order_rng": order_gen.get_state(), "step": step,
                        "epoch": epoch, "cursor": cursor, "order": order, "train_s": train_s}, ckpt + ".tmp")
            os.replace(ckpt + ".tmp", ckpt)
            lap = time.perf_counter()
            window_t += lap - t  # evaluation time is not training time
    with open(os.path.join(a.out, "done.json"), "w") as f:
        json.dump({"steps": step}, f)


if __name__ == "__main__":
    main()
