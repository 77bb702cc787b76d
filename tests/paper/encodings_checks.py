"""The encodings laboratory at the toy scale (bench/paper/encodings-toy.ini): BERT-A, RoPE,
ALiBi, NoPE and TUPE-R pre-trained and fine-tuned by the paper harness from one command, and:
  - the report has the five rows, each WNLI entry equal to the median recomputed from its own
    fine-tuning runs (at the LR the selection split chose), and a validation loss for each;
  - each row was pre-trained as its encoding (effective_config.ini), and the checkpoints of
    RoPE, ALiBi and NoPE hold no positional tensor at all (no input table, no positional.*);
  - the three score differently from each other in the metrics (they are different models).

Usage: encodings_checks.py WORKDIR      Environment: TUPE_BIN (via the harness), TUPE_SOURCE_DIR.
"""
import json
import os
import re
import shutil
import subprocess
import sys

from safetensors.numpy import load_file

from paper_checks import PAPER, SRC, best_lr_median, check

ROWS = {"BERT-A": "bert-absolute", "RoPE": "rope", "ALiBi": "alibi", "NoPE": "none", "TUPE-R": "tupe-relative"}


def main(work):
    shutil.rmtree(work, ignore_errors=True)
    scale = os.path.join(SRC, "bench", "paper", "encodings-toy.ini")
    p = subprocess.run([sys.executable, PAPER, "--scale", scale, "--work", work, "--store", ""], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    check(p.returncode == 0, "paper.py --scale encodings-toy.ini exited 0" + ("" if p.returncode == 0 else ":\n" + p.stdout[-3000:]))
    report = open(os.path.join(work, "report.md")).read()
    first_table = report.split("\n## ")[0]
    table = {m.group(1): m.group(2) for m in re.finditer(r"^\| (\S+) \| ([^|]+) \|", first_table, re.M)}
    check(all(r in table for r in ROWS), f"the report has the five rows: {sorted(table)}")
    finals = {}
    for row, encoding in ROWS.items():
        m, steps = best_lr_median(os.path.join(work, "glue", f"{row}-seed1", "step20", "WNLI", "results.json"))
        got = float(table[row].split()[0])
        check(steps == 20 and abs(got - m) < 0.051, f"{row}: WNLI {got} == {m:.2f} (recomputed), from step {steps}")
        ckpt = os.path.join(work, "pretrain", f"{row}-seed1", "checkpoints")
        cfg = open(os.path.join(ckpt, "effective_config.ini")).read()
        check(f"position_encoding = {encoding}\n" in cfg, f"{row} was pre-trained as {encoding}")
        names = load_file(os.path.join(ckpt, "step_00000020", "model.safetensors")).keys()
        positional = sorted(n for n in names if "positional" in n or "embeddings.position" in n)
        if encoding in ("rope", "alibi", "none"):
            check(not positional, f"{row}: no positional tensor in the checkpoint")
        else:
            check(bool(positional), f"{row}: its positional tensors {positional[:3]}")
        with open(os.path.join(ckpt, "metrics", "rank_0.jsonl")) as f:
            finals[row] = [json.loads(line)["validation_loss"] for line in f if "validation_loss" in line][-1]
        check(re.search(rf"^\| {re.escape(row)} \| [0-9.]+", report.split("## Validation MLM loss")[1], re.M) is not None,
              f"{row}: a validation loss in the report ({finals[row]:.6f})")
    three = [finals[r] for r in ("RoPE", "ALiBi", "NoPE")]
    check(len(set(three)) == 3, f"RoPE, ALiBi and NoPE are different models: final validation losses {three}")
    print("encodings toy OK")


if __name__ == "__main__":
    main(sys.argv[1])
