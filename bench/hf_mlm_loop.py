"""Reference pre-training loop for the benchmark: HuggingFace `transformers`
BertForMaskedLM + torch.optim.AdamW in plain PyTorch, the way a Python user would write it.

Usage: hf_mlm_loop.py --hidden H --layers N --heads A --ffn F --seq L --batch B --steps S
                      --threads T --precision fp32|bf16
Prints one line: "hf tokens/s <value>" (padded tokens processed per second, after warm-up).
Inputs are random ids with 15% of positions labelled (the compute does not depend on the ids).
"""
import argparse
import time

import torch
from transformers import BertConfig, BertForMaskedLM


def main() -> None:
    ap = argparse.ArgumentParser()
    for k in ("hidden", "layers", "heads", "ffn", "seq", "batch", "steps", "threads", "vocab"):
        ap.add_argument(f"--{k}", type=int, default=30522 if k == "vocab" else None)
    ap.add_argument("--precision", default="fp32")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=a.vocab, hidden_size=a.hidden, num_hidden_layers=a.layers, num_attention_heads=a.heads,
                     intermediate_size=a.ffn, max_position_embeddings=max(512, a.seq), type_vocab_size=1,
                     attn_implementation="sdpa")
    model = BertForMaskedLM(cfg).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.01)
    ids = torch.randint(5, a.vocab, (a.batch, a.seq))
    labels = torch.full_like(ids, -100)
    mask = torch.rand(a.batch, a.seq) < 0.15
    labels[mask] = ids[mask]
    attn = torch.ones_like(ids)

    def step():
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.precision == "bf16"):
            loss = model(input_ids=ids, attention_mask=attn, labels=labels).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)

    for _ in range(3):
        step()
    t0 = time.perf_counter()
    for _ in range(a.steps):
        step()
    dt = time.perf_counter() - t0
    print(f"hf tokens/s {a.batch * a.seq * a.steps / dt:.1f}")


if __name__ == "__main__":
    main()
