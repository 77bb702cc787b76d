"""The model card (README.md) of a `tupe export` folder, read with huggingface_hub's ModelCard.

check_card(out, ckpt, remote, run_example) checks, against the files themselves:
  metadata     library_name transformers, pipeline_tag (fill-mask; text-classification for a
               fine-tuned model), language en, tags (tupe, bert, the variant's slug)
  the model    the parameter count = the sum of numel over the checkpoint's model.safetensors
  pre-training steps and global batch = the pre-training checkpoint's trainer_state.json;
               sequences seen = steps x global batch; the validation loss = the last
               validation record of its metrics/rank_0.jsonl (model-index, exactly); the
               corpus's sequences and tokens = the sums over the training shards' headers (h5py)
  GLUE         (fine-tuned) every reported dev metric of <output_dir>/results.json, exactly
  loading      the card's Python example, run as it stands (offline) from the folder's parent: it
               loads the folder and runs the fill-mask or text-classification pipeline
  paths        the card names no absolute path of this machine (the export folder's parent, the
               checkpoint's), only the run and file names
check_card_alone(model_step, work): a fine-tuned model copied away beside a damaged
results.json still exports (a warning names the file); its card says the results are missing.
"""
import glob
import json
import os
import re

import h5py
from huggingface_hub import ModelCard
from safetensors.torch import load_file

from hf_common import TUPE, VOCAB, check, run

SLUGS = {"bert-absolute": "bert-a", "bert-relative": "bert-r", "tupe-absolute": "tupe-a", "tupe-relative": "tupe-r",
         "bert-absolute-untied": "bert-a-d", "rope": "rope", "alibi": "alibi", "none": "nope"}
HUB_METRIC = {"mcc": "matthews_correlation", "pearson": "pearsonr", "spearman": "spearmanr"}


def last_validation(pre_ckpt, step):
    path = os.path.join(os.path.dirname(pre_ckpt), "metrics", "rank_0.jsonl")
    records = [json.loads(line) for line in open(path, encoding="utf-8") if line.strip()]
    vals = [r for r in records if "validation_loss" in r and r["step"] <= step]
    return vals[-1]["validation_loss"], vals[-1]["step"]


def shard_sums(shards):
    seqs = toks = 0
    for f in sorted(glob.glob(os.path.join(shards, "train-*.h5"))):
        with h5py.File(f, "r") as h:
            seqs += int(h.attrs["num_sequences"])
            toks += int(h.attrs["num_tokens"])
    return seqs, toks


def run_example(card, label, out):
    blocks = re.findall(r"```python\n(.*?)```", card.text, re.S)
    check(len(blocks) == 1, f"{label}: the card holds one Python example")
    scope = {}
    here = os.getcwd()
    os.chdir(os.path.dirname(os.path.abspath(out)))  # where a user who downloaded the folder stands
    try:
        exec(compile(blocks[0], "README.md example", "exec"), scope)  # prints the pipeline's output
    finally:
        os.chdir(here)
    check("model" in scope and "encoder" in scope, f"{label}: the card's example loads {type(scope['model']).__name__}")


def check_card(out, ckpt, remote, example=False):
    label = os.path.basename(out)
    card = ModelCard.load(os.path.join(out, "README.md"))
    state = json.load(open(os.path.join(ckpt, "trainer_state.json")))
    cfg = state["config"]
    fine_tuned = "glue.task" in cfg
    d = card.data
    variant = SLUGS[cfg["model.position_encoding"]]
    pipe = "text-classification" if fine_tuned else "fill-mask"
    check(d.library_name == "transformers" and d.pipeline_tag == pipe and d.language in ("en", ["en"]),
          f"{label}: card metadata library_name {d.library_name}, pipeline_tag {d.pipeline_tag}, language {d.language}")
    check({"tupe", "bert", pipe, variant} <= set(d.tags) and (("custom_code" in d.tags) == remote), f"{label}: tags {d.tags}")
    params = sum(t.numel() for t in load_file(os.path.join(ckpt, "model.safetensors")).values())
    check(f"| parameters | {params} (" in card.text, f"{label}: parameters {params} (the checkpoint's tensors)")
    pre = cfg["glue.pretrain_checkpoint"] if fine_tuned else ckpt
    pre_state = json.load(open(os.path.join(pre, "trainer_state.json")))
    step, batch = pre_state["step"], int(pre_state["config"]["data.global_batch_size"])
    check(f"| steps | {step} |" in card.text and f"| global batch | {batch} sequences |" in card.text,
          f"{label}: pre-training steps {step}, global batch {batch}")
    check(f"| sequences seen | {step * batch} (" in card.text, f"{label}: sequences seen {step * batch}")
    loss, at = last_validation(pre, step)
    check(f"| validation loss (MLM) | {loss:.4f} nats per masked token at step {at} " in card.text,
          f"{label}: validation loss {loss:.4f} at step {at} in the text")
    seqs, toks = shard_sums(pre_state["config"]["data.train_shards"])
    check(f"{seqs:,} sequences, {toks:,} tokens" in card.text, f"{label}: corpus {seqs} sequences, {toks} tokens (shard headers)")
    results = d.eval_results or []
    if not fine_tuned:
        got = [r.metric_value for r in results if r.metric_type == "loss"]
        check(got == [loss] and results[0].task_type == "fill-mask", f"{label}: model-index validation loss {got} == {loss!r}")
    else:
        rfile = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(ckpt))), "results.json")
        task = next(t for t in json.load(open(rfile))["tasks"] if t["task"] == cfg["glue.task"])
        want = {(HUB_METRIC.get(m, m), split): v for split, ms in task["reported"].items() for m, v in ms.items()}
        got = {(r.metric_type, r.metric_name.split(" (")[1][:-1]): r.metric_value for r in results}
        check(want and got == want and all(r.task_type == "text-classification" for r in results),
              f"{label}: model-index GLUE results {got} == results.json's {want}")
        check(all(r.dataset_type == "nyu-mll/glue" for r in results) or cfg["glue.task"] not in ("SST-2", "RTE"),
              f"{label}: dataset nyu-mll/glue")
    if remote:
        check("trust_remote_code=True" in card.text, f"{label}: the example passes trust_remote_code=True")
    machine = [os.path.dirname(os.path.abspath(out)), os.path.abspath(ckpt), os.path.dirname(os.path.abspath(pre))]
    check(not any(m in card.text or m in str(d.to_dict()) for m in machine),
          f"{label}: the card names no absolute path of this machine ({[m for m in machine if m in card.text]})")
    if example:
        run_example(card, label, out)


def check_card_alone(model_step, work):
    """A fine-tuned model's folder copied away from its run, beside a damaged results.json:
    the export still succeeds (a warning names the file) and the card says what is missing."""
    import shutil
    run_dir = os.path.join(work, "card_alone")
    shutil.rmtree(run_dir, ignore_errors=True)
    step = os.path.join(run_dir, "models", "SST-2", os.path.basename(model_step))
    shutil.copytree(model_step, step)
    with open(os.path.join(run_dir, "results.json"), "w") as f:
        f.write('{"format": "tupe-glue-results", "tasks": [')  # cut short
    out = os.path.join(work, "card_alone_hf")
    p = run(TUPE, "export", "--checkpoint", step, "--output", out, "--vocab", VOCAB)
    card = ModelCard.load(os.path.join(out, "README.md"))
    check("No results.json of this model was found" in card.text and not card.data.eval_results,
          "a damaged results.json: the card carries no GLUE results, the export succeeds")
    check(os.path.join(run_dir, "results.json") in p.stderr, "the export warns, naming the damaged results.json")
