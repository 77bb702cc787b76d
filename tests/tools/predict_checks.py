"""`tupe predict` against transformers on the folder `tupe export --format hf` writes.

Usage: predict_checks.py WORKDIR HF_PRETRAINED_WORKDIR
HF_PRETRAINED_WORKDIR is the work folder of Tools_hf_pretrained (CTest fixture HfCheckpoints):
its tiny BERT-A, TUPE-R and BERT-A^d checkpoints (`tupe pretrain`, 5 steps on WikiText-2 shards)
and their exported folders hf_bert-a_auto (BertForMaskedLM), hf_tupe-r_auto and hf_bert-a-d_auto
(remote code).
  fill-mask   on WikiText-2 lines with [MASK]s (one, two, next to punctuation): the top-5 token
              ids equal transformers' fill-mask pipeline's and the probabilities are within
              1e-5 absolute and 1e-4 relative (a reordering is accepted only between
              probabilities within 1e-5 of each other); TSV and stdin/stdout give the same
              predictions; batch size 1 and 4 agree.
  embeddings  BERT-A, TUPE-R and BERT-A^d: [CLS] vectors and last hidden states against AutoModel's
              last_hidden_state on the same input_ids (1e-5 abs, real tokens).
  errors      a line without [MASK], a line longer than max_positions, a fine-tuned model (no
              MLM head), no / a missing / a wrong vocabulary: exit code 1, ONE stderr line naming
              the file (and line) and the cause, and no output file (nor a temporary) left.
Environment: TUPE_BIN, TUPE_SHARED_DATA, TUPE_SOURCE_DIR.
"""
import hashlib
import json
import os
import shutil
import sys
import time

import torch
from safetensors.torch import load_file
from transformers.utils import logging as hf_logging
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from script_checks import check, run  # noqa: E402

TUPE = os.environ["TUPE_BIN"]
DATA = os.environ["TUPE_SHARED_DATA"]
SOURCE = os.environ["TUPE_SOURCE_DIR"]
VOCAB = os.path.join(DATA, "vocab", "bert-base-uncased-vocab.txt")
WIKI = os.path.join(DATA, "text", "wikitext-2", "wiki.test.raw")
GLUE = os.path.join(DATA, "glue")
TOL = 1e-5
torch.set_num_threads(1)
hf_logging.set_verbosity_error()
hf_logging.disable_progress_bar()


def masked_lines(work):
    """WikiText-2 sentences (test split) with [MASK]s put in: one mask, two masks, a mask before a full stop."""
    lines = []
    with open(WIKI, encoding="utf-8") as f:
        for raw in f:
            words = raw.split()
            if len(words) < 12 or raw.strip().startswith("="):
                continue
            words = words[:24]
            n = len(lines)
            words[5] = "[MASK]"
            if n % 3 == 1:
                words[9] = "[MASK]"
            if n % 3 == 2:
                words[-1] = "[MASK]."
            lines.append(" ".join(words))
            if len(lines) == 9:
                break
    path = os.path.join(work, "masked.txt")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    return path, lines


def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def fill_mask(work, pre):
    """BERT-A (exported as BertForMaskedLM), TUPE-R and BERT-A^d (tupe's remote code, no segment embedding)."""
    for name, remote in (("bert-a", False), ("tupe-r", True), ("bert-a-d", True)):
        print(f"--- {name}")
        fill_mask_of(work, pre, name, remote)


def fill_mask_of(work, pre, name, remote):
    from transformers import AutoTokenizer, pipeline
    ckpt, hf = os.path.join(pre, f"ckpt_{name}", "step_00000005"), os.path.join(pre, f"hf_{name}_auto")
    check(os.path.isdir(ckpt) and os.path.isdir(hf), f"{ckpt} and {hf}: the {name} checkpoint and its export (Tools_hf_pretrained)")
    path, lines = masked_lines(work)
    out = os.path.join(work, f"fill_{name}.jsonl")
    run(TUPE, "predict", "--checkpoint", ckpt, "--vocab", VOCAB, "--mode", "fill-mask", "--input", path, "--output", out,
        "--batch-size", "4", "--device", "cpu", "--threads", "1")
    ours = read_jsonl(out)
    check(len(ours) == len(lines) and [r["line"] for r in ours] == list(range(1, len(lines) + 1)),
          f"{len(lines)} JSONL records, in input order")
    fill = pipeline("fill-mask", model=hf, tokenizer=hf, top_k=5, device="cpu", trust_remote_code=remote)
    tok = AutoTokenizer.from_pretrained(hf, trust_remote_code=remote)
    worst, worst_rel, top, reordered, masks = 0.0, 0.0, 0.0, 0, 0
    for rec, text in zip(ours, lines):
        ref = fill(text)
        ref = [ref] if isinstance(ref[0], dict) else ref
        check(len(ref) == len(rec["masks"]), f"line {rec['line']}: {len(ref)} [MASK](s)")
        ids = tok(text)["input_ids"]
        for m, r in zip(rec["masks"], ref):
            masks += 1
            check(ids[m["position"]] == tok.mask_token_id, f"line {rec['line']}: position {m['position']} is [MASK] in transformers' ids too")
            got = [(p["token_id"], p["probability"]) for p in m["predictions"]]
            want = [(p["token"], p["score"]) for p in r]
            check([p["token"] for p in m["predictions"]] == tok.convert_ids_to_tokens([i for i, _ in got]),
                  f"line {rec['line']}: token strings are the vocabulary's")
            for (gi, gp), (wi, wp) in zip(got, want):
                worst, worst_rel, top = max(worst, abs(gp - wp)), max(worst_rel, abs(gp - wp) / wp), max(top, wp)
                if gi != wi:  # a tie within tolerance may order differently
                    other = dict(want).get(gi)
                    check(other is not None and abs(other - gp) <= TOL and abs(gp - wp) <= TOL,
                          f"line {rec['line']}: token {gi} (p {gp:.7f}) vs transformers' {wi} (p {wp:.7f}): only a tie may reorder")
                    reordered += 1
            check(max(abs(gp - wp) for (_, gp), (_, wp) in zip(got, want)) <= TOL, f"line {rec['line']}: top-5 probabilities within {TOL}")
    check(True, f"{name} fill-mask: {masks} [MASK]s, top-5 ids equal transformers' pipeline ({reordered} tie reorderings), "
                f"max |probability diff| {worst:.2e} <= {TOL}")
    # The 5-step model's distributions are flat (top probabilities below 1e-3), so also
    # bound the relative difference: the absolute tolerance alone would be loose.
    check(worst_rel <= 1e-4, f"fill-mask: max relative probability diff {worst_rel:.2e} <= 1e-4 (largest probability {top:.3g}, "
                             f"uniform {1 / tok.vocab_size:.2g})")
    # TSV, stdin/stdout and the batch size give the same predictions.
    if remote:
        return  # the output formats below do not depend on the model
    tsv = os.path.join(work, "fill.tsv")
    run(TUPE, "predict", "--checkpoint", ckpt, "--vocab", VOCAB, "--mode", "fill-mask", "--input", path, "--output", tsv,
        "--format", "tsv", "--batch-size", "1", "--device", "cpu", "--threads", "1")
    rows = [r.split("\t") for r in open(tsv, encoding="utf-8").read().splitlines()]
    check(rows[0] == ["line", "mask", "position", "rank", "token_id", "token", "probability"] and len(rows) == 1 + 5 * masks,
          f"TSV: header + {5 * masks} rows")
    flat = [(int(r[0]), int(r[4]), float(r[6])) for r in rows[1:]]
    ref_flat = [(rec["line"], p["token_id"], p["probability"]) for rec in ours for m in rec["masks"] for p in m["predictions"]]
    d = max(abs(a[2] - b[2]) for a, b in zip(flat, ref_flat))
    check([a[:2] for a in flat] == [b[:2] for b in ref_flat] and d <= 1e-6,
          f"TSV at batch size 1 == JSONL at batch size 4 (max |p diff| {d:.1e})")
    p = run(TUPE, "predict", "--checkpoint", ckpt, "--vocab", VOCAB, "--mode", "fill-mask", "--batch-size", "4",
            "--device", "cpu", "--threads", "1", stdin=open(path, encoding="utf-8").read())
    check(p.stdout == open(out, encoding="utf-8").read(), "stdin -> stdout gives the same JSONL as --input/--output")
    # A UTF-8 byte-order mark opening the file is no part of line 1's text.
    bom = os.path.join(work, "bom.txt")
    with open(bom, "w", encoding="utf-8-sig") as f:
        f.write(lines[0] + "\n")
    p = run(TUPE, "predict", "--checkpoint", ckpt, "--vocab", VOCAB, "--mode", "fill-mask", "--input", bom,
            "--device", "cpu", "--threads", "1")
    rec = json.loads(p.stdout.splitlines()[0])
    ids_of = lambda r: [[q["token_id"] for q in m["predictions"]] for m in r["masks"]]  # noqa: E731
    check(rec["text"] == lines[0] and ids_of(rec) == ids_of(ours[0]),
          f"a byte-order mark is not echoed in the text ({rec['text'][:12]!r}) nor read as input")


def embeddings(work, pre):
    from transformers import AutoModel
    path, _ = masked_lines(work)
    for name, remote in (("bert-a", False), ("tupe-r", True), ("bert-a-d", True)):
        ckpt, hf = os.path.join(pre, f"ckpt_{name}", "step_00000005"), os.path.join(pre, f"hf_{name}_auto")
        kw = {"trust_remote_code": True} if remote else {"attn_implementation": "eager"}
        model = AutoModel.from_pretrained(hf, **kw).eval()
        for pooling in ("tokens", "cls"):
            out = os.path.join(work, f"emb_{name}_{pooling}.safetensors")
            run(TUPE, "predict", "--checkpoint", ckpt, "--vocab", VOCAB, "--mode", "embeddings", "--pooling", pooling,
                "--input", path, "--output", out, "--batch-size", "3", "--device", "cpu", "--threads", "1")
            t = load_file(out)
            ids, mask = t["input_ids"], t["attention_mask"]
            with torch.no_grad():
                ref = model(input_ids=ids, attention_mask=mask).last_hidden_state
            if pooling == "tokens":
                real = mask.bool()
                d = (t["hidden"][real] - ref[real]).abs().max().item()
                check(t["hidden"].shape == ref.shape and t["hidden"][~real].abs().max().item() == 0, f"{name}: hidden {tuple(ref.shape)}, 0 at padding")
            else:
                d = (t["cls"] - ref[:, 0]).abs().max().item()
                check(t["cls"].shape == (ids.shape[0], ref.shape[-1]), f"{name}: cls {tuple(t['cls'].shape)}")
            check(d <= TOL, f"{name} [{pooling}]: embeddings vs transformers' AutoModel last_hidden_state, max |diff| {d:.2e} <= {TOL}")


def without_vocab(ckpt, dest):
    """A copy of checkpoint `ckpt` at `dest` that carries no vocabulary (a valid checkpoint)."""
    shutil.copytree(ckpt, dest)
    os.remove(os.path.join(dest, "vocab.txt"))
    state_path = os.path.join(dest, "trainer_state.json")
    state = json.load(open(state_path))
    state["tokenizer"]["vocab_file"] = ""
    state["config"]["tokenizer.vocab"] = ""
    open(state_path, "w").write(json.dumps(state, indent=2) + "\n")
    manifest_path = os.path.join(dest, "manifest.json")
    manifest = json.load(open(manifest_path))
    del manifest["files"]["vocab.txt"]
    manifest["files"]["trainer_state.json"] = {"bytes": os.path.getsize(state_path),
                                               "sha256": hashlib.sha256(open(state_path, "rb").read()).hexdigest()}
    open(manifest_path, "w").write(json.dumps(manifest, indent=2) + "\n")
    return dest


def errors(work, pre):
    ckpt = os.path.join(pre, "ckpt_bert-a", "step_00000005")
    good = "the cat sat on the [MASK] ."

    def refused(label, text, want, *args):
        src = os.path.join(work, f"in_{label}.txt")
        with open(src, "w", encoding="utf-8") as f:
            f.write(text)
        out = os.path.join(work, f"out_{label}.jsonl")
        p = run(TUPE, "predict", "--checkpoint", ckpt, "--mode", "fill-mask", "--input", src, "--output", out,
                "--device", "cpu", *args, ok=False)
        lines = p.stderr.strip().splitlines()
        check(p.returncode == 1 and len(lines) == 1 and all(w.replace("SRC", src) in lines[0] for w in want),
              f"{label}: one error line naming {want}: {lines[-1] if lines else ''}")
        check(not os.path.exists(out) and not any(".tmp-" in n for n in os.listdir(work)), f"{label}: nothing written")

    v = ("--vocab", VOCAB)
    refused("no_mask", f"{good}\nno mask in this line\n", ["SRC:2:", "no [MASK]"], *v)
    refused("lower_mask", "a [mask] written in lower case\n", ["SRC:1:", "no [MASK]"], *v)
    refused("too_long", good + " word" * 200 + "\n", ["SRC:1:", "more than the model's max_positions 128"], *v)
    refused("blank", f"{good}\n\n{good}\n", ["SRC:2:", "blank line"], *v)
    # The checkpoint carries its vocabulary: no --vocab needed. A copy that carries none
    # (record without vocab_file, file and manifest entry removed) asks for --vocab.
    p = run(TUPE, "predict", "--checkpoint", ckpt, "--mode", "fill-mask", "--device", "cpu", stdin=good + "\n")
    check(os.path.join(ckpt, "vocab.txt") in p.stderr, "no --vocab: the carried vocab.txt is used")
    carried = ckpt
    ckpt = without_vocab(carried, os.path.join(work, "bare", "step_00000005"))
    refused("no_vocab", good + "\n", ["step_00000005", "no vocabulary", "--vocab"])
    ckpt = carried
    refused("missing_vocab", good + "\n", ["--vocab /nonexistent/vocab.txt: no such file"], "--vocab", "/nonexistent/vocab.txt")
    wrong = os.path.join(work, "wrong_vocab.txt")
    words = open(VOCAB, encoding="utf-8").read().splitlines()
    with open(wrong, "w", encoding="utf-8") as f:
        f.write("\n".join(words[:-1] + ["zzzzunused"]) + "\n")
    refused("wrong_vocab", good + "\n", [wrong, "differs from the checkpoint's"], "--vocab", wrong)
    # A model of `tupe finetune` keeps no MLM head: fill-mask is refused, embeddings work.
    glue_out = os.path.join(work, "glue")
    run(TUPE, "finetune", "--config", os.path.join(SOURCE, "configs", "glue", "tiny.ini"), "--finetune.checkpoint", ckpt,
        "--finetune.data_dir", GLUE, "--finetune.tasks", "SST-2", "--finetune.train_rows", "64", "--finetune.epochs", "1",
        "--finetune.predict_test", "false", "--finetune.threads", "1", "--precision.precision", "fp32",
        "--tokenizer.vocab", VOCAB, "--finetune.output_dir", glue_out)
    model = os.path.join(glue_out, "models", "SST-2")
    ckpt = model
    refused("finetuned", good + "\n", ["SST-2", "no MLM head", "fill-mask needs a checkpoint of tupe pretrain"], *v)
    # tupe analyze cannot score masked tokens with it either: refused in one line, nothing written.
    analysis = os.path.join(work, "analysis_finetuned")
    p = run(TUPE, "analyze", "--checkpoint", model, "--output", analysis, "--validation-shards", model, ok=False)
    lines = p.stderr.strip().splitlines()
    check(p.returncode == 1 and len(lines) == 1 and "no MLM head" in lines[0] and "--validation-shards" in lines[0]
          and not os.path.exists(analysis), f"analyze --validation-shards of a fine-tuned model: {lines[-1:]}")
    out = os.path.join(work, "emb_finetuned.safetensors")
    run(TUPE, "predict", "--checkpoint", model, "--vocab", VOCAB, "--mode", "embeddings", "--output", out, stdin=good + "\n")
    check(load_file(out)["cls"].shape == (1, 64), "embeddings of a fine-tuned model: cls (1, 64)")
    p = run(TUPE, "predict", "--checkpoint", model, "--vocab", VOCAB, "--mode", "embeddings", ok=False, stdin=good)
    check(p.returncode == 1 and "--output" in p.stderr, "embeddings without --output: refused")


if __name__ == "__main__":
    workdir, pretrained = sys.argv[1], sys.argv[2]
    shutil.rmtree(workdir, ignore_errors=True)
    os.makedirs(workdir)
    start = time.time()
    for step in (fill_mask, embeddings, errors):
        print(f"\n=== {step.__name__}")
        step(workdir, pretrained)
    print(f"all checks passed ({time.time() - start:.1f} s)")
