"""Reading tupe's pre-training shards with h5py, and the fixed masked validation set that the
convergence benchmark scores every model on (tupe's and Hugging Face's alike).

A shard (docs/formats.md, "pre-training shards") holds the packed sequences back to back in
`token_ids` and each one's length in `sequence_lengths`; sequence i starts at the sum of the
lengths before it. The root attributes name the special-token ids.
"""
from __future__ import annotations

import glob
import os

import h5py
import numpy as np
import torch


def shard_files(folder: str, split: str) -> list[str]:
    """The `<split>-*-of-*.h5` files of a shard folder, sorted; raises if there are none."""
    files = sorted(glob.glob(os.path.join(folder, f"{split}-*-of-*.h5")))
    if not files:
        raise SystemExit(f"{folder}: no {split} shards")
    return files


def read_sequences(folder: str, split: str) -> tuple[list[np.ndarray], dict]:
    """Every sequence of the split's shards (int64 arrays, [CLS] ... [SEP]), in shard order,
    and the special-token ids {pad, cls, sep, mask, unk, vocab_size} of the first shard."""
    seqs: list[np.ndarray] = []
    special = None
    for path in shard_files(folder, split):
        with h5py.File(path, "r") as f:
            ids = f["token_ids"][:].astype(np.int64)
            lengths = f["sequence_lengths"][:].astype(np.int64)
            if special is None:
                a = f.attrs
                special = {k: int(a[f"{k}_id"]) for k in ("pad", "cls", "sep", "mask", "unk")}
                special["vocab_size"] = int(a["vocab_size"])
        starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
        seqs.extend(ids[s:s + n] for s, n in zip(starts, lengths))
    return seqs, special


def pad_batch(seqs: list[np.ndarray], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(input_ids, attention_mask), both (B, L) int64, L the longest sequence of the batch."""
    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, :len(s)] = torch.from_numpy(s)
        mask[i, :len(s)] = 1
    return ids, mask


def fixed_validation_batches(folder: str, batch_size: int, seed: int, cache: str | None = None) -> list[dict]:
    """The validation split of `folder`, masked once and for all: per sequence 15% of the
    ordinary tokens (not [PAD] [CLS] [SEP] [MASK] [UNK]), at least one, chosen uniformly
    without replacement; of those 80% [MASK], 10% a uniform random ordinary id, 10% unchanged
    (BERT's rule). Drawn from a numpy Generator(seed), so the set depends on nothing else.
    Returns batches {input_ids, attention_mask (B, L) int64, positions (M, 2) int64 (row,
    column), labels (M,) int64}; cached in `cache` (a .pt file) when given."""
    if cache and os.path.exists(cache):
        return torch.load(cache)
    seqs, sp = read_sequences(folder, "validation")
    rng = np.random.default_rng(seed)
    specials = np.array([sp["pad"], sp["cls"], sp["sep"], sp["mask"], sp["unk"]])
    ordinary_ids = np.setdiff1d(np.arange(sp["vocab_size"]), specials)
    masked_seqs, picks = [], []
    for s in seqs:
        cand = np.flatnonzero(~np.isin(s, specials))
        k = max(1, int(round(0.15 * len(cand))))
        chosen = np.sort(rng.choice(cand, size=k, replace=False))
        u = rng.random(k)
        out = s.copy()
        out[chosen[u < 0.8]] = sp["mask"]
        rand = chosen[(u >= 0.8) & (u < 0.9)]
        out[rand] = rng.choice(ordinary_ids, size=len(rand))
        masked_seqs.append(out)
        picks.append((chosen, s[chosen]))
    batches = []
    for b in range(0, len(seqs), batch_size):
        ids, mask = pad_batch(masked_seqs[b:b + batch_size], sp["pad"])
        rows, cols, labels = [], [], []
        for r, (chosen, lab) in enumerate(picks[b:b + batch_size]):
            rows.extend([r] * len(chosen))
            cols.extend(chosen.tolist())
            labels.extend(lab.tolist())
        batches.append({"input_ids": ids, "attention_mask": mask,
                        "positions": torch.tensor([rows, cols], dtype=torch.long).t().contiguous(),
                        "labels": torch.tensor(labels, dtype=torch.long)})
    if cache:
        torch.save(batches, cache + ".tmp")
        os.replace(cache + ".tmp", cache)
    return batches


@torch.no_grad()
def masked_lm_loss(model, batches: list[dict]) -> float:
    """Mean cross-entropy (nats) over every masked token of `batches` for a transformers
    masked-LM model (BertForMaskedLM, or tupe's exported TupeForMaskedLM): the encoder over
    the whole batch, the MLM head at the masked positions only (the same numbers as the full
    logits, without the (B, L, V) tensor)."""
    model.eval()
    total, count = 0.0, 0
    base = model.base_model
    head = model.cls if hasattr(model, "cls") else None
    for b in batches:
        if head is None:  # models without a separable head: full logits
            logits = model(input_ids=b["input_ids"], attention_mask=b["attention_mask"]).logits
            picked = logits[b["positions"][:, 0], b["positions"][:, 1]]
        else:
            hidden = base(input_ids=b["input_ids"], attention_mask=b["attention_mask"]).last_hidden_state
            picked = head(hidden[b["positions"][:, 0], b["positions"][:, 1]])
        total += torch.nn.functional.cross_entropy(picked.float(), b["labels"], reduction="sum").item()
        count += len(b["labels"])
    model.train()
    return total / count
