"""What the transformers checks of tests/tools share: the environment, running a command, checking.

Environment: TUPE_BIN, TUPE_TOOLS_FIXTURE, TUPE_SHARED_DATA, TUPE_SOURCE_DIR.
"""
import os
import subprocess
import sys
import time

import torch
from transformers.utils import logging as hf_logging

TUPE = os.environ["TUPE_BIN"]
FIXTURE = os.environ["TUPE_TOOLS_FIXTURE"]
DATA = os.environ["TUPE_SHARED_DATA"]
SOURCE = os.environ["TUPE_SOURCE_DIR"]
VOCAB = os.path.join(DATA, "vocab", "bert-base-uncased-vocab.txt")
WIKI = os.path.join(DATA, "text", "wikitext-2", "wiki.test.raw")
TOL = 1e-5
torch.manual_seed(0)
torch.set_num_threads(1)
hf_logging.set_verbosity_error()  # the load reports of heads left out on purpose; loading_info is checked
hf_logging.disable_progress_bar()


def run(*args, ok=True):
    t = time.time()
    p = subprocess.run([str(a) for a in args], capture_output=True, text=True)
    tail = "\n".join((p.stdout + p.stderr).strip().splitlines()[-3:])
    print(f"$ {' '.join(str(a) for a in args)} -> {p.returncode} ({time.time() - t:.1f} s)\n{tail}")
    if ok and p.returncode != 0:
        sys.exit(f"FAIL: command failed with {p.returncode}:\n{p.stdout}{p.stderr}")
    return p


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        sys.exit(1)


def maxdiff(a, b):
    return (a.double() - b.double()).abs().max().item()
