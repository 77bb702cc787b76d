"""Diagnostic runs of the convergence benchmark: Hugging Face's BertForMaskedLM trained by the
same plain loop as hf_train.py (dropout 0, fp32), with tupe's pieces swapped in one at a time,
to find what made tupe's curve differ from transformers' (bench/RESULTS.md, "Convergence
parity").

  --init hf|tupe    transformers' own initialisation, or tupe's step-0 weights
                    (FIXTURE/step0.safetensors under BertForMaskedLM names)
  --data hf|tupe    transformers' DataCollatorForLanguageModeling on a torch.randperm order,
                    or the batches tupe's loader and masking produced (FIXTURE/batches.safetensors)
  --token-type trainable|frozen-zero
                    BertForMaskedLM's token-type row (added to every token before the embedding
                    LayerNorm): trained (transformers' default; with --init tupe it starts at
                    zero) or fixed at zero, which is exactly tupe's model with type_vocab_size = 0

FIXTURE is a folder written by the trajectory test's fixture at the benchmark's size:
  build/tests/trajectory/trajectory_fixture SHARDS/train FIXTURE precision=fp32 steps=300 \\
      batch=32 hidden=128 layers=2 heads=2 ffn=512 warmup=60 total=600 seed=1 data_seed=1
The schedule is tupe's (update k uses lr(k); warm-up 60 of 600 steps), AdamW and clipping as
hf_train.py. Writes OUT/metrics.jsonl: {"step", "loss", "lr", "grad_norm"} per step, plus
"validation_loss" every 100 steps on the benchmark's fixed validation set (mlm_data.py).
"""
import argparse
import json
import os
import sys

import torch
from safetensors.torch import load_file
from transformers import BertConfig, BertForMaskedLM, BertTokenizer, DataCollatorForLanguageModeling

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mlm_data  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shards", required=True, help="the folder with train/ and validation/ shards")
    ap.add_argument("--vocab", required=True)
    ap.add_argument("--fixture", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--init", choices=("hf", "tupe"), default="hf")
    ap.add_argument("--data", choices=("hf", "tupe"), default="hf")
    ap.add_argument("--token-type", choices=("trainable", "frozen-zero"), default="trainable")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    os.makedirs(a.out, exist_ok=True)
    train, sp = mlm_data.read_sequences(os.path.join(a.shards, "train"), "train")
    val = mlm_data.fixed_validation_batches(os.path.join(a.shards, "validation"), 64, 20261201,
                                            cache=os.path.join(a.out, "..", "validation-batches.pt"))
    tok = BertTokenizer(vocab=a.vocab, do_lower_case=True)
    collator = DataCollatorForLanguageModeling(tokenizer=tok, mlm=True, mlm_probability=0.15, return_tensors="pt")
    torch.manual_seed(a.seed)
    cfg = BertConfig(vocab_size=sp["vocab_size"], hidden_size=128, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=512, max_position_embeddings=128, hidden_dropout_prob=0.0,
                     attention_probs_dropout_prob=0.0, layer_norm_eps=1e-12, pad_token_id=sp["pad"])
    model = BertForMaskedLM(cfg).train()
    token_type = model.bert.embeddings.token_type_embeddings.weight
    if a.init == "tupe":
        w = load_file(os.path.join(a.fixture, "step0.safetensors"))
        sd = model.state_dict()
        for k, v in w.items():
            if k.startswith("bert.embeddings.token_type"):
                sd[k].zero_()
                sd[k][: v.shape[0]] = v.float()
            elif k in sd and sd[k].shape == v.shape:
                sd[k].copy_(v.float())
            else:
                raise SystemExit(f"{a.fixture}/step0.safetensors: no place for {k} {tuple(v.shape)}")
        model.load_state_dict(sd)
        model.tie_weights()
    if a.token_type == "frozen-zero":
        with torch.no_grad():
            token_type.zero_()
        token_type.requires_grad_(False)
    params = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    no_decay = lambda n: n.endswith("bias") or "LayerNorm" in n  # noqa: E731
    opt = torch.optim.AdamW([{"params": [p for n, p in params if not no_decay(n)], "weight_decay": 0.01},
                             {"params": [p for n, p in params if no_decay(n)], "weight_decay": 0.0}],
                            lr=1e-3, betas=(0.9, 0.999), eps=1e-6)
    total, warmup = 600, 60  # tupe's schedule (trainer/lr_schedule.h): update k uses lr(k)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda k: (k + 1) / warmup if k + 1 <= warmup else max(0.0, (total - k - 1) / (total - warmup)))
    batches = load_file(os.path.join(a.fixture, "batches.safetensors")) if a.data == "tupe" else None
    order = torch.randperm(len(train), generator=torch.Generator().manual_seed(a.seed)).tolist()
    with open(os.path.join(a.out, "metrics.jsonl"), "w") as log:
        for step in range(1, a.steps + 1):
            if batches is not None:
                ids = batches[f"{step}/input_ids"].long()
                attn = batches[f"{step}/attention_mask"].long()
                labels = torch.full(ids.shape, -100, dtype=torch.long)
                labels.view(-1)[batches[f"{step}/masked_positions"].long()] = batches[f"{step}/masked_labels"].long()
            else:
                b = collator([{"input_ids": train[i].tolist()} for i in order[(step - 1) * 32: step * 32]])
                ids, labels = b["input_ids"], b["labels"]
                attn = (ids != sp["pad"]).long()
            loss = model(input_ids=ids, attention_mask=attn, labels=labels).loss
            loss.backward()
            grad_norm = torch.nn.utils.clip_grad_norm_([p for _, p in params], 1.0)
            rec = {"step": step, "loss": loss.item(), "lr": sched.get_last_lr()[0], "grad_norm": grad_norm.item()}
            opt.step()
            sched.step()
            opt.zero_grad(set_to_none=True)
            if step % 100 == 0:
                rec["validation_loss"] = mlm_data.masked_lm_loss(model, val)
                print(f"{a.out}: step {step} validation loss {rec['validation_loss']:.4f}", flush=True)
            log.write(json.dumps(rec) + "\n")
            log.flush()


if __name__ == "__main__":
    main()
