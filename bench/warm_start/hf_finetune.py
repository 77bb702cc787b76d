"""One GLUE fine-tuning run with Hugging Face's own classes, as the reference of tupe's
fine-tuning parity (bench/warm_start/finetune_parity.py): transformers'
BertForSequenceClassification from a Hugging Face BERT folder, torch.optim.AdamW, a linear
warm-up then linear decay to 0, gradient clipping, dynamic padding -- set to the same
hyper-parameters as tupe's run (tupe's finetune defaults: AdamW betas 0.9/0.999, eps 1e-6,
weight decay 0.01 except biases and LayerNorm weights, clip 1.0, warm-up ratio 0.06, dropout
0.1; the LR of update k is peak * k / W during warm-up, as tupe's schedule).

Usage: hf_finetune.py --model DIR --glue DIR --task SST-2|MRPC|STS-B|RTE --lr LR --epochs N
         --batch B --max-length L --seed S --out RESULT.json [--threads T] [--train-rows N]
Writes {"task", "seed", "scores": {metric: value}, "primary", "seconds"} (dev set, last epoch).
"""
import argparse
import csv
import json
import math
import os
import random
import time

import numpy as np
import torch
from scipy.stats import pearsonr, spearmanr
from sklearn.metrics import f1_score
from transformers import BertForSequenceClassification, BertTokenizerFast

# task -> (sentence columns, label column, labels or None for regression, primary metric)
TASKS = {
    "SST-2": (("sentence",), "label", ["0", "1"], "accuracy"),
    "MRPC": (("#1 String", "#2 String"), "Quality", ["0", "1"], "accuracy"),
    "STS-B": (("sentence1", "sentence2"), "score", None, "pearson"),
    "RTE": (("sentence1", "sentence2"), "label", ["entailment", "not_entailment"], "accuracy"),
}


def read_split(glue, task, split, rows=0):
    cols, label, labels, _ = TASKS[task]
    with open(os.path.join(glue, task, f"{split}.tsv"), encoding="utf-8-sig", newline="") as f:
        table = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    head = table[0]
    idx = [head.index(c) for c in cols]
    li = head.index(label)
    texts, targets = [], []
    for r in table[1:]:
        if len(r) != len(head):
            continue
        texts.append(tuple(r[i] for i in idx))
        targets.append(float(r[li]) if labels is None else labels.index(r[li]))
    if rows:
        texts, targets = texts[:rows], targets[:rows]
    return texts, targets


def encode(tok, texts, max_length):
    if len(texts[0]) == 1:
        return tok([t[0] for t in texts], truncation=True, max_length=max_length)
    return tok([t[0] for t in texts], [t[1] for t in texts], truncation="longest_first", max_length=max_length)


def batch_of(enc, idx):
    rows = [{k: enc[k][i] for k in ("input_ids", "token_type_ids", "attention_mask")} for i in idx]
    length = max(len(r["input_ids"]) for r in rows)
    out = {k: torch.zeros(len(rows), length, dtype=torch.long) for k in rows[0]}
    for b, r in enumerate(rows):
        for k, v in r.items():
            out[k][b, :len(v)] = torch.tensor(v)
    return out


def scores(task, preds, targets):
    if TASKS[task][2] is None:
        return {"pearson": float(pearsonr(preds, targets)[0]), "spearman": float(spearmanr(preds, targets)[0])}
    acc = float(np.mean(np.array(preds) == np.array(targets)))
    out = {"accuracy": acc}
    if task == "MRPC":
        out["f1"] = float(f1_score(targets, preds))
    return out


def main():
    ap = argparse.ArgumentParser()
    for k in ("model", "glue", "task", "out"):
        ap.add_argument("--" + k, required=True)
    ap.add_argument("--lr", type=float, required=True)
    ap.add_argument("--epochs", type=int, required=True)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--max-length", type=int, default=128)
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--train-rows", type=int, default=0)
    ap.add_argument("--warmup-ratio", type=float, default=0.06)
    a = ap.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    t0 = time.time()
    random.seed(a.seed)
    torch.manual_seed(a.seed)
    regression = TASKS[a.task][2] is None
    tok = BertTokenizerFast.from_pretrained(a.model)
    train_x, train_y = read_split(a.glue, a.task, "train", a.train_rows)
    dev_x, dev_y = read_split(a.glue, a.task, "dev")
    train_enc, dev_enc = encode(tok, train_x, a.max_length), encode(tok, dev_x, a.max_length)
    model = BertForSequenceClassification.from_pretrained(
        a.model, num_labels=1 if regression else len(TASKS[a.task][2]), attn_implementation="sdpa")
    decay = [p for n, p in model.named_parameters() if not (n.endswith("bias") or "LayerNorm" in n)]
    plain = [p for n, p in model.named_parameters() if n.endswith("bias") or "LayerNorm" in n]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01}, {"params": plain, "weight_decay": 0.0}],
                            lr=a.lr, betas=(0.9, 0.999), eps=1e-6)
    steps_per_epoch = math.ceil(len(train_x) / a.batch)
    total = steps_per_epoch * a.epochs
    warmup = round(a.warmup_ratio * total)

    def lr_factor(k):  # k = updates done; the LR of update k + 1, as tupe's LrSchedule
        s = k + 1
        if s <= warmup:
            return s / warmup
        return max(0.0, (total - s) / (total - warmup)) if total > warmup else 0.0
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_factor)
    gen = torch.Generator().manual_seed(a.seed)
    for _ in range(a.epochs):
        model.train()
        order = torch.randperm(len(train_x), generator=gen).tolist()
        for k in range(steps_per_epoch):
            idx = order[k * a.batch:(k + 1) * a.batch]
            b = batch_of(train_enc, idx)
            y = torch.tensor([train_y[i] for i in idx], dtype=torch.float if regression else torch.long)
            logits = model(**b).logits
            loss = torch.nn.functional.mse_loss(logits.squeeze(-1), y) if regression else \
                torch.nn.functional.cross_entropy(logits, y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
    model.eval()
    preds = []
    with torch.no_grad():
        for k in range(0, len(dev_x), 64):
            logits = model(**batch_of(dev_enc, range(k, min(len(dev_x), k + 64)))).logits
            preds += logits.squeeze(-1).tolist() if regression else logits.argmax(-1).tolist()
    result = {"task": a.task, "seed": a.seed, "lr": a.lr, "scores": scores(a.task, preds, dev_y),
              "primary": TASKS[a.task][3], "seconds": time.time() - t0}
    with open(a.out + ".tmp", "w") as f:
        json.dump(result, f)
    os.replace(a.out + ".tmp", a.out)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
