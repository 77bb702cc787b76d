"""What the transformers checks of tests/tools share: the environment, running a command, checking.

Environment: TUPE_BIN, TUPE_TOOLS_FIXTURE, TUPE_SHARED_DATA, TUPE_SOURCE_DIR.
"""
import os
import sys

import torch
from transformers.utils import logging as hf_logging
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from script_checks import check, run  # noqa: E402,F401 (re-exported to the hf_* scripts)

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


def maxdiff(a, b):
    return (a.double() - b.double()).abs().max().item()
