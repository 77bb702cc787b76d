"""Scores tupe checkpoints exported to Hugging Face folders (`tupe export`) on the fixed
masked validation set of the convergence benchmark (mlm_data.py), so that tupe's and
transformers' models are measured by one piece of code on identical inputs.

Usage: score_exports.py --validation SHARDS --run RUN --steps 100,200 --cache FILE
Reads RUN/hf/step-N for every N; writes RUN/eval.jsonl ({"step", "validation_loss"}).
"""
import argparse
import json
import os
import sys

import torch
from transformers import AutoModelForMaskedLM

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mlm_data  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--validation", required=True)
    ap.add_argument("--run", required=True)
    ap.add_argument("--steps", required=True)
    ap.add_argument("--cache", required=True)
    ap.add_argument("--eval-batch", type=int, default=64)
    ap.add_argument("--eval-seed", type=int, default=20261201)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    val = mlm_data.fixed_validation_batches(a.validation, a.eval_batch, a.eval_seed, cache=a.cache)
    rows = []
    for s in sorted(int(x) for x in a.steps.split(",")):
        model = AutoModelForMaskedLM.from_pretrained(os.path.join(a.run, "hf", f"step-{s}"), trust_remote_code=True)
        v = mlm_data.masked_lm_loss(model, val)
        print(f"{a.run}: step {s} validation loss {v:.4f}", flush=True)
        rows.append({"step": s, "validation_loss": v})
    with open(os.path.join(a.run, "eval.jsonl.tmp"), "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    os.replace(os.path.join(a.run, "eval.jsonl.tmp"), os.path.join(a.run, "eval.jsonl"))


if __name__ == "__main__":
    main()
