"""`tupe export --format hf` against tupe's own forward pass, through the pinned transformers.

Usage: hf_checks.py CHECK WORKDIR [PRETRAINED_WORKDIR]   with CHECK one of
  pretrained  for each variant (TUPE-A, TUPE-R and TUPE-R tie-cls, BERT-A, BERT-R with and
              without the [CLS] buckets, pre-LN TUPE-A with eps 1e-5, BERT-A^d, RoPE, ALiBi, NoPE):
              `tupe pretrain` a tiny model (5 steps, real WikiText-2 shards), `tupe export`, load it with
              AutoModelForMaskedLM / AutoModel / AutoModelForSequenceClassification and compare
              MLM logits and every layer's hidden states with tupe's forward (tools_fixture
              forward): at most 1e-5 abs in fp32. Also: config.json states the constants; the
              T5 buckets of modeling_tupe equal docs/model.md's table; a wrong [CLS] bucket or word-term
              scale in config.json moves the logits (the comparison has power); BERT-A also
              through --format hf-tupe. RoPE, ALiBi, NoPE on 2 rows of max_positions + 64 tokens
              (past the trained length) instead; a wrong rope_base, or ALiBi read as NoPE, moves
              the logits. The model card of every export (card_checks.py). HF's standard calls on WikiText-2 for every variant
              (hf_standard_calls.py): model(**tokenizer(...)) on sentences and pairs (with
              token_type_ids), AutoModel, feature-extraction, against tupe's forward on the
              same ids (1e-5); TUPE-R and BERT-A: resize_token_embeddings (+ pad_to_multiple_of)
              + forward + save + reload.
  finetuned   TUPE-R, BERT-A and BERT-A^d (the checkpoints of `pretrained` in PRETRAINED_WORKDIR when given, else
              pre-trained here): `tupe finetune` on SST-2 (tiny), `tupe evaluate`, export; the
              sequence-classification logits against tupe's forward (1e-5); transformers'
              predictions on SST-2 dev/test (tokenised by AutoTokenizer) against evaluate's
              accuracy and submission file, by model(**tokenizer(...)) and by the
              text-classification pipeline; three AdamW steps of
              AutoModelForSequenceClassification on the exported pre-trained TUPE-R reduce the loss;
              the model card with results.json's GLUE numbers (card_checks.py).
  tokenizers  AutoTokenizer of exported folders against tupe's tokenizers on WikiText-2 lines:
              WordPiece (lower-cased and not), SentencePiece unigram and BPE (`tupe vocab`).
Environment: TUPE_BIN, TUPE_TOOLS_FIXTURE, TUPE_SHARED_DATA, TUPE_SOURCE_DIR.
Fails (never skips) when torch, transformers or safetensors is missing.
"""
import csv
import glob
import json
import math
import os
import shutil
import sys
import time

import torch
from safetensors.torch import load_file, save_file

from card_checks import check_card, check_card_alone
from hf_common import DATA, FIXTURE, SOURCE, TOL, TUPE, VOCAB, WIKI, check, maxdiff, run
from hf_standard_calls import resize_and_reload, standard_calls



def wiki_subset(work, lines=1200):
    """The first `lines` non-empty lines of WikiText-2 (test split), for shards and tokenizers."""
    path = os.path.join(work, "wiki.txt")
    with open(WIKI, encoding="utf-8", newline="") as f, open(path, "w", encoding="utf-8") as out:
        n = 0
        for line in f:
            if line.strip():
                out.write(line.rstrip("\r\n") + "\n")
                n += 1
                if n == lines:
                    break
    return path


def shards(work):
    out = os.path.join(work, "shards")
    run(TUPE, "preprocess", "--config", os.path.join(SOURCE, "configs", "tiny.ini"), "--tokenizer.vocab", VOCAB,
        "--input", wiki_subset(work), "--output", out, "--quiet")
    return out


def pretrain(work, shard_dir, name, *overrides):
    ckpt = os.path.join(work, "ckpt_" + name)
    run(TUPE, "pretrain", "--config", os.path.join(SOURCE, "configs", "tiny.ini"), "--resume", "none",
        "--data.train_shards", shard_dir, "--data.validation_shards", shard_dir, "--checkpoint.dir", ckpt,
        "--checkpoint.every_steps", "0", "--optimizer.total_steps", "5", "--optimizer.warmup_steps", "1",
        "--optimizer.lr", "0.01", "--train.eval_every", "0", "--train.eval_batches", "1", "--train.progress", "false",
        "--precision.precision", "fp32", "--tokenizer.vocab", VOCAB, *overrides)  # (tiny.ini's is checkout-relative)
    return os.path.join(ckpt, "step_00000005")


def export(ckpt, out, *extra):
    shutil.rmtree(out, ignore_errors=True)
    return run(TUPE, "export", "--checkpoint", ckpt, "--output", out, "--vocab", VOCAB, *extra).stdout


def reference(ckpt, work, name, longer=0):
    """tupe's forward (tools_fixture forward) on 2 rows of max_positions random ids (row 1 padded),
    or with `longer`, on 2 rows of max_positions + longer random ids, row 1 padded from max_positions."""
    path = os.path.join(work, f"ref_{name}.safetensors")
    if not longer:
        run(FIXTURE, "forward", ckpt, path)
        return load_file(path)
    saved = json.load(open(os.path.join(ckpt, "trainer_state.json")))["config"]
    T, V = int(saved["model.max_positions"]), int(saved["model.vocab_size"])
    mask = torch.ones(2, T + longer, dtype=torch.long)
    mask[1, T:] = 0
    ids = torch.randint(5, V, (2, T + longer), generator=torch.Generator().manual_seed(7)) * mask  # [PAD] = 0
    in_path = os.path.join(work, f"ref_{name}_in.safetensors")
    save_file({"input_ids": ids, "attention_mask": mask}, in_path)
    run(FIXTURE, "forward", ckpt, path, in_path)
    return load_file(path)


def hf_forward(model, ref, **kw):
    with torch.no_grad():
        return model(input_ids=ref["input_ids"], attention_mask=ref["attention_mask"], output_hidden_states=True, **kw)


def compare_encoder(out, ref, label):
    """hidden_states[i] = input of layer i, then last_hidden_state (transformers' convention)."""
    layers = sum(1 for k in ref if k.startswith("hidden_"))
    diffs = [maxdiff(out.hidden_states[i], ref[f"hidden_{i}"]) for i in range(layers)]
    last = maxdiff(out.hidden_states[-1], ref["last_hidden"])
    check(len(out.hidden_states) == layers + 1, f"{label}: {layers} + 1 hidden states")
    check(max(diffs + [last]) <= TOL, f"{label}: hidden states max |diff| {max(diffs + [last]):.2e} <= {TOL}")
    return max(diffs + [last])


T5_TABLE = {0: [0]}  # docs/model.md "The relative bias": bucket -> relative positions r = j - i (|r| <= 200)
for b in range(1, 8):
    T5_TABLE[b], T5_TABLE[16 + b] = [-b], [b]
for b, (lo, hi) in enumerate([(8, 11), (12, 15), (16, 22), (23, 31), (32, 45), (46, 63), (64, 90), (91, 200)], 8):
    T5_TABLE[b] = list(range(-hi, -lo + 1))
    T5_TABLE[16 + b] = list(range(lo, hi + 1))


def check_buckets(model):
    """The T5 buckets of the loaded modeling_tupe against docs/model.md's table, for |r| <= 200."""
    relative_buckets = sys.modules[type(model).__module__].relative_buckets
    r = torch.arange(-200, 201)
    want = torch.empty_like(r)
    for bucket, rs in T5_TABLE.items():
        for x in rs:
            want[x + 200] = bucket
    check(torch.equal(relative_buckets(r, 32, 128), want), "modeling_tupe's T5 buckets (32, 128) equal docs/model.md's table")


CASES = [  # name, position_encoding, untie_cls, extra pretrain overrides
    ("tupe-a", "tupe-absolute", "true", []),
    ("tupe-r", "tupe-relative", "true", []),
    ("tupe-r-tie-cls", "tupe-relative", "false", []),
    ("bert-a", "bert-absolute", "false", []),
    ("bert-r", "bert-relative", "false", []),
    ("bert-r-untie-cls", "bert-relative", "true", []),
    ("tupe-a-pre-ln", "tupe-absolute", "true", ["--model.layer_norm", "pre", "--model.layer_norm_eps", "1e-5"]),
    ("bert-a-d", "bert-absolute-untied", "false", []),
    ("rope", "rope", "false", []),  # no position table: compared past max_positions (COMPUTED)
    ("alibi", "alibi", "false", []),
    ("none", "none", "false", []),
]
COMPUTED = ("rope", "alibi", "none")


def pretrained(work):  # its checkpoints stay for `finetuned` (CTest fixture HfCheckpoints)
    from transformers import AutoModel, AutoModelForMaskedLM, AutoModelForSequenceClassification
    shard_dir = shards(work)
    results, calls = [], []
    for name, variant, untie, extra in CASES:
        print(f"\n=== {name}")
        ckpt = pretrain(work, shard_dir, name, "--model.position_encoding", variant, "--model.untie_cls", untie, *extra)
        ref = reference(ckpt, work, name, longer=64 if variant in COMPUTED else 0)  # past max_positions: no table
        formats = ["auto", "hf-tupe"] if variant == "bert-absolute" else ["auto"]
        for fmt in formats:
            out = os.path.join(work, f"hf_{name}_{fmt}")
            stdout = export(ckpt, out, "--format", fmt)
            cfg = json.load(open(os.path.join(out, "config.json")))
            tok = json.load(open(os.path.join(out, "tokenizer_config.json")))
            check(tok["tokenizer_class"] == "BertTokenizer" and tok["do_lower_case"] is True,
                  "tokenizer_config: BertTokenizer, do_lower_case from the training shards")
            remote = cfg["model_type"] == "tupe"
            check(remote == (fmt == "hf-tupe" or variant != "bert-absolute"),
                  f"format {fmt}: {'tupe remote code' if remote else 'plain BertForMaskedLM'} ({cfg['architectures']})")
            check(("format hf-tupe, TupeForMaskedLM" if remote else "format hf-bert, BertForMaskedLM") in stdout,
                  "export names the format and the class")
            check_card(out, ckpt, remote, example=fmt == "auto" and name in ("tupe-r", "bert-a"))
            if remote:
                check_constants(cfg, variant, untie == "true", "pre" if "pre" in extra else "post", float(extra[-1]) if extra else 1e-12)
            kw = {"trust_remote_code": True} if remote else {"attn_implementation": "eager"}
            model, info = AutoModelForMaskedLM.from_pretrained(out, output_loading_info=True, **kw)
            missing = [k for k in info["missing_keys"] if "decoder" not in k]
            check(not missing and not info["unexpected_keys"] and not info["mismatched_keys"],
                  f"loaded strictly (missing {info['missing_keys']}, unexpected {info['unexpected_keys']})")
            model.eval()
            o = hf_forward(model, ref)
            logit_diff = maxdiff(o.logits.reshape(-1, o.logits.shape[-1]), ref["mlm_logits"])
            check(logit_diff <= TOL, f"{name} [{fmt}]: MLM logits on 2 x {ref['input_ids'].shape[1]} tokens max |diff| "
                                     f"{logit_diff:.2e} <= {TOL} (logit scale {ref['mlm_logits'].abs().max().item():.3g})")
            hidden_diff = compare_encoder(o, ref, f"{name} [{fmt}]")
            results.append((name, fmt, cfg["architectures"][0], logit_diff, hidden_diff))
            if fmt == "auto":
                calls.append((name, *standard_calls(out, ckpt, work, name, remote)))
                if name == "bert-a":
                    resize_and_reload(out, work, name, remote)
            if remote:
                base = AutoModel.from_pretrained(out, trust_remote_code=True).eval()
                check(type(base).__name__ == "TupeModel", "AutoModel -> TupeModel")
                d = maxdiff(hf_forward(base, ref).last_hidden_state, ref["last_hidden"])
                check(d <= TOL, f"AutoModel last_hidden_state max |diff| {d:.2e}")
                cls = AutoModelForSequenceClassification.from_pretrained(out, trust_remote_code=True, num_labels=3).eval()
                check(type(cls).__name__ == "TupeForSequenceClassification" and hf_forward(cls, ref).logits.shape == (2, 3),
                      "AutoModelForSequenceClassification -> TupeForSequenceClassification, (2, 3) logits")
                if name == "bert-a-d":
                    bert_ad_controls(out, work, ref)
                if variant in COMPUTED:
                    computed_controls(out, work, name, variant, ref)
                if name == "tupe-r":
                    resize_and_reload(out, work, name, remote)
                    negative_controls(out, work, ref)
                    check_buckets(model)
                    check(open(os.path.join(out, "modeling_tupe.py")).read() ==
                          open(os.path.join(SOURCE, "tools", "export", "hf_tupe", "modeling_tupe.py")).read(),
                          "the exported modeling_tupe.py is the source tree's (compiled into tupe)")
    lower_case_recorded(work, shard_dir)
    print("\nvariant | format | class | max |logit diff| | max |hidden diff|")
    for name, fmt, arch, ld, hd in results:
        print(f"{name} | {fmt} | {arch} | {ld:.2e} | {hd:.2e}")
    print("\nmodel(**tokenizer(...)) on WikiText-2 vs tupe's forward: variant | single sentences | pairs (token_type_ids given) "
          "| feature-extraction")
    for name, single, pair, feat in calls:
        print(f"{name} | {single:.2e} | {pair:.2e} | {feat:.2e}")


def lower_case_recorded(work, shard_dir):
    """Without its training shards a pre-training checkpoint still says how WordPiece cases
    text (its tokenizer record) and carries its vocabulary: export needs neither --vocab nor
    --lower-case; a contradicting --lower-case is refused in one line, nothing left behind.
    (Checkpoints without the record: tests/tools/travel_checks.py.)"""
    moved = shard_dir + "_moved"
    os.rename(shard_dir, moved)
    out = os.path.join(work, "hf_no_shards")
    ckpt = os.path.join(work, "ckpt_tupe-r")
    shutil.rmtree(out, ignore_errors=True)
    p = run(TUPE, "export", "--checkpoint", ckpt, "--output", out, "--lower-case", "false", ok=False)
    lines = p.stderr.strip().splitlines()
    check(p.returncode == 1 and len(lines) == 1 and "--lower-case false contradicts the checkpoint's tokenizer.lower_case true"
          in lines[0], "one-line refusal of a contradicting --lower-case")
    check(not os.path.exists(out) and not any(".tmp-" in n for n in os.listdir(work)), "nothing left behind")
    run(TUPE, "export", "--checkpoint", ckpt, "--output", out)
    check(json.load(open(os.path.join(out, "tokenizer_config.json")))["do_lower_case"] is True and
          open(os.path.join(out, "vocab.txt"), "rb").read() == open(VOCAB, "rb").read(),
          "no shards, no --vocab, no --lower-case: do_lower_case true and the vocabulary from the checkpoint")
    os.rename(moved, shard_dir)


def check_constants(cfg, variant, untie, placement, eps):
    dh = cfg["hidden_size"] // cfg["num_attention_heads"]
    tupe, rel = variant.startswith("tupe"), variant.endswith("relative")
    bert_ad = variant == "bert-absolute-untied"  # docs/model.md "BERT-A^d": 1/sqrt(4 d_h), its own table
    want = {
        "position_encoding": variant, "untie_cls": untie, "layer_norm_placement": placement,
        "word_term_scale": 1 / math.sqrt((4 if bert_ad else 2 if tupe else 1) * dh),
        "positional_term_scale": 1 / math.sqrt(2 * dh) if tupe else None,
        "position_table_size": (128 + (1 if untie else 0)) if tupe else 128 if bert_ad else 0,
        "relative_bucket_function": "t5-bidirectional", "relative_buckets": 32, "relative_max_distance": 128,
        "relative_bias_rows": 33 if rel else 0,
        "cls_row_bucket": 16 if rel and untie else None, "cls_column_bucket": 32 if rel and untie else None,
        "rope_base": 10000.0,  # stated by every variant, read by rope only
    }
    bad = {k: (cfg.get(k), v) for k, v in want.items()
           if not (cfg.get(k) == v or (isinstance(v, float) and abs(cfg.get(k, 0) - v) < 1e-15))}
    check(not bad and abs(cfg["layer_norm_eps"] - eps) < 1e-20, f"config.json states the constants ({bad or 'all as expected'})")
    check(set(cfg["auto_map"]) == {"AutoConfig", "AutoModel", "AutoModelForMaskedLM", "AutoModelForSequenceClassification"},
          "auto_map names the config and the three model classes")


def negative_controls(out, work, ref):
    """The comparison has power: one wrong constant in config.json moves the logits. (The [CLS]
    row's bucket cannot: it adds one constant to a whole softmax row; the column's bucket can.)"""
    from transformers import AutoModelForMaskedLM
    cfg = json.load(open(os.path.join(out, "config.json")))
    for key, value in (("cls_column_bucket", cfg["cls_row_bucket"]), ("word_term_scale", cfg["word_term_scale"] * math.sqrt(2))):
        bad = os.path.join(work, "bad_" + key)
        shutil.rmtree(bad, ignore_errors=True)
        shutil.copytree(out, bad)
        json.dump({**cfg, key: value}, open(os.path.join(bad, "config.json"), "w"))
        model = AutoModelForMaskedLM.from_pretrained(bad, trust_remote_code=True).eval()
        d = maxdiff(hf_forward(model, ref).logits.reshape(-1, cfg["vocab_size"]), ref["mlm_logits"])
        check(d > 5 * TOL, f"control: {key} = {value:.4g} in config.json moves the logits by {d:.2e} (> {5 * TOL:g})")


def logits_moved(out, bad, cfg, change, ref):
    """The export `out` copied to `bad` with `change` written into its config.json, loaded by
    AutoModelForMaskedLM: the largest move of its MLM logits from tupe's reference `ref`."""
    from transformers import AutoModelForMaskedLM
    shutil.rmtree(bad, ignore_errors=True)
    shutil.copytree(out, bad)
    json.dump({**cfg, **change}, open(os.path.join(bad, "config.json"), "w"))
    model = AutoModelForMaskedLM.from_pretrained(bad, trust_remote_code=True).eval()
    return maxdiff(hf_forward(model, ref).logits.reshape(-1, cfg["vocab_size"]), ref["mlm_logits"])


def bert_ad_controls(out, work, ref):
    """BERT-A^d's four terms have power: the same tensors read as two terms only (word-word plus
    position-position: position_encoding tupe-absolute, tied [CLS], the same 1/sqrt(4 d_h) on
    both, i.e. what q' = [q, pq], k' = [k, pk] would compute) or with TUPE's scale move the
    logits; and a backward reaches U^Q."""
    from transformers import AutoModel
    cfg = json.load(open(os.path.join(out, "config.json")))
    s = cfg["word_term_scale"]
    for label, change in (("two terms only", {"position_encoding": "tupe-absolute", "positional_term_scale": s}),
                          ("TUPE's scale 1/sqrt(2 d_h)", {"word_term_scale": s * math.sqrt(2)})):
        d = logits_moved(out, os.path.join(work, "bad_bert_ad"), cfg, change, ref)
        check(d > 5 * TOL, f"control: BERT-A^d read with {label} moves the logits by {d:.2e} (> {5 * TOL:g})")
    base = AutoModel.from_pretrained(out, trust_remote_code=True)
    base(input_ids=ref["input_ids"], attention_mask=ref["attention_mask"]).last_hidden_state.pow(2).sum().backward()
    g = base.positional.query.weight.grad
    check(g is not None and g.abs().sum().item() > 0, "BERT-A^d: the position projection U^Q receives gradients")


def computed_controls(out, work, name, variant, ref):
    """RoPE, ALiBi, NoPE (compared on 2 rows of max_positions + 64 tokens, past the length trained
    on): the comparison has power: RoPE read with rope_base / 100, and ALiBi read as NoPE, move
    the logits."""
    cfg = json.load(open(os.path.join(out, "config.json")))
    check(ref["input_ids"].shape[1] > cfg["max_position_embeddings"],
          f"{name}: compared on {ref['input_ids'].shape[1]} tokens, past max_position_embeddings {cfg['max_position_embeddings']}")
    changes = {"rope": (("rope_base / 100", {"rope_base": cfg["rope_base"] / 100}),),
               "alibi": (("NoPE", {"position_encoding": "none"}),), "none": ()}[variant]
    for label, change in changes:
        d = logits_moved(out, os.path.join(work, "bad_" + name), cfg, change, ref)
        check(d > 5 * TOL, f"control: {name} read with {label} moves the logits by {d:.2e} (> {5 * TOL:g})")


GLUE = os.path.join(DATA, "glue")


def read_tsv(path):
    with open(path, encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))


def classify(model, tok, sentences, max_length):
    preds = []
    with torch.no_grad():
        for i in range(0, len(sentences), 256):
            enc = tok(sentences[i:i + 256], truncation=True, max_length=max_length, padding=True, return_tensors="pt")
            preds += model(**enc).logits.argmax(-1).tolist()
    return preds


def finetuned(work, pretrained_work=None):
    from transformers import AutoModelForSequenceClassification, AutoTokenizer
    shard_dir = None if pretrained_work else shards(work)
    # Fine-tuning long enough that the predictions differ from row to row (the comparisons
    # below mean little for a model that predicts one class).
    for name, variant, untie, rows, epochs, lr in (("tupe-r", "tupe-relative", "true", "2000", "2", "1e-3"),
                                                   ("bert-a", "bert-absolute", "false", "2000", "2", "1e-3"),
                                                   ("bert-a-d", "bert-absolute-untied", "false", "2000", "2", "1e-3")):
        print(f"\n=== {name}")
        if pretrained_work:
            ckpt = os.path.join(pretrained_work, "ckpt_" + name, "step_00000005")
            check(os.path.isdir(ckpt), f"{ckpt}: the {name} checkpoint of the pretrained check")
        else:
            ckpt = pretrain(work, shard_dir, name, "--model.position_encoding", variant, "--model.untie_cls", untie)
        glue_out, eval_out = os.path.join(work, "glue_" + name), os.path.join(work, "eval_" + name)
        run(TUPE, "finetune", "--config", os.path.join(SOURCE, "configs", "glue", "tiny.ini"), "--finetune.checkpoint", ckpt,
            "--finetune.data_dir", GLUE, "--finetune.tasks", "SST-2", "--finetune.train_rows", rows, "--finetune.epochs", epochs,
            "--finetune.learning_rates", lr, "--finetune.seeds", "1",
            "--finetune.max_length", "64", "--finetune.threads", "1", "--precision.precision", "fp32",
            "--tokenizer.vocab", VOCAB, "--finetune.output_dir", glue_out)
        model_dir = os.path.join(glue_out, "models", "SST-2")
        run(TUPE, "evaluate", "--model", model_dir, "--tokenizer.vocab", VOCAB, "--finetune.data_dir", GLUE,
            "--finetune.output_dir", eval_out, "--finetune.threads", "1", "--precision.precision", "fp32")
        out = os.path.join(work, "hf_ft_" + name)
        stdout = export(model_dir, out)
        remote = variant != "bert-absolute"
        want_class = "TupeForSequenceClassification" if remote else "BertForSequenceClassification"
        check(want_class in stdout, f"fine-tuned {name} exported as {want_class}")
        check_card(out, max(glob.glob(os.path.join(model_dir, "step_*"))), remote, example=True)
        if name == "tupe-r":
            check_card_alone(max(glob.glob(os.path.join(model_dir, "step_*"))), work)
        ref = reference(model_dir, work, "ft_" + name)
        model, info = AutoModelForSequenceClassification.from_pretrained(out, output_loading_info=True, trust_remote_code=remote)
        check(not info["missing_keys"] and not info["unexpected_keys"], f"loaded strictly ({info['missing_keys']}, {info['unexpected_keys']})")
        model.eval()
        check(type(model).__name__ == want_class and model.config.id2label == {0: "0", 1: "1"},
              f"{type(model).__name__} with SST-2's labels {model.config.id2label}")
        o = hf_forward(model, ref)
        d = maxdiff(o.logits, ref["sentence_logits"])
        check(d <= TOL, f"{name}: sequence-classification logits max |diff| {d:.2e} <= {TOL} (logits {o.logits.tolist()})")
        compare_encoder(o, ref, name)
        # transformers end to end (AutoTokenizer + the exported model) against `tupe evaluate`.
        tok = AutoTokenizer.from_pretrained(out, trust_remote_code=remote)
        dev = read_tsv(os.path.join(GLUE, "SST-2", "dev.tsv"))
        preds = classify(model, tok, [r["sentence"] for r in dev], 64)
        acc = sum(int(p == int(r["label"])) for p, r in zip(preds, dev)) / len(dev)
        report = json.load(open(os.path.join(eval_out, "evaluation_SST-2.json")))
        want_acc = report["dev"]["dev"]["accuracy"]
        check(abs(acc - want_acc) < 1e-12, f"SST-2 dev accuracy through transformers {acc:.6f} == tupe evaluate's {want_acc:.6f}")
        test = read_tsv(os.path.join(GLUE, "SST-2", "test.tsv"))
        submitted = read_tsv(os.path.join(eval_out, "submission", "SST-2.tsv"))
        preds = classify(model, tok, [r["sentence"] for r in test], 64)
        same = sum(int(p == int(s["prediction"])) for p, s in zip(preds, submitted))
        check(len(submitted) == len(test) and same == len(test), f"SST-2 test predictions: {same} of {len(test)} equal evaluate's submission")
        # The same through the text-classification pipeline (labels by the config's id2label).
        from transformers import pipeline
        clf = pipeline("text-classification", model=out, tokenizer=out, device="cpu", trust_remote_code=remote)
        kw = {"truncation": True, "max_length": 64, "batch_size": 64}
        piped = [model.config.label2id[r["label"]] for r in clf([r["sentence"] for r in test], **kw)]
        same = sum(int(p == int(s["prediction"])) for p, s in zip(piped, submitted))
        check(same == len(test), f"text-classification pipeline: {same} of {len(test)} SST-2 test predictions equal evaluate's submission")
        piped = [model.config.label2id[r["label"]] for r in clf([r["sentence"] for r in dev], **kw)]
        acc = sum(int(p == int(r["label"])) for p, r in zip(piped, dev)) / len(dev)
        check(abs(acc - want_acc) < 1e-12, f"text-classification pipeline: SST-2 dev accuracy {acc:.6f} == tupe evaluate's {want_acc:.6f}")
        ones = sum(preds) / len(preds)
        check(0.1 < ones < 0.9, f"the fine-tuned model's predictions vary ({ones:.2f} of the test rows positive)")
        if remote:
            three_steps(os.path.join(work, "hf_pre_" + name), ckpt, tok)


def three_steps(out, ckpt, tok):
    """Three AdamW steps of AutoModelForSequenceClassification on an exported pre-trained model (TUPE-R, BERT-A^d)."""
    from transformers import AutoModelForSequenceClassification
    export(ckpt, out)
    torch.manual_seed(0)
    model = AutoModelForSequenceClassification.from_pretrained(out, trust_remote_code=True, num_labels=2)
    rows = read_tsv(os.path.join(GLUE, "SST-2", "train.tsv"))[:32]
    enc = tok([r["sentence"] for r in rows], truncation=True, max_length=64, padding=True, return_tensors="pt",
              return_token_type_ids=True)  # given to a model without a segment embedding: ignored
    labels = torch.tensor([int(r["label"]) for r in rows])

    def loss_eval():
        model.eval()
        with torch.no_grad():
            return model(**enc, labels=labels).loss.item()

    before = loss_eval()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for step in range(3):
        model.train()
        loss = model(**enc, labels=labels).loss
        loss.backward()
        if step == 0:
            g = model.tupe.positional.query.weight.grad
            check(g is not None and g.abs().sum().item() > 0, "the untied positional term receives gradients")
        opt.step()
        opt.zero_grad()
    after = loss_eval()
    check(after < before, f"3 AdamW steps reduce the loss on the batch: {before:.4f} -> {after:.4f}")


EXTRA_LINES = ["Café naïve résumé — “quoted” text, 2,000.5 km/h; e-mail a@b.c!",
               "東京 and 北京 are cities; Ünïcödé ÀÉÎ ß œ", "  spaced   out \t words  ", "UPPER lower MiXeD 123abc"]


def tokenizers(work):
    from transformers import AutoTokenizer
    text = wiki_subset(work, 1500)
    with open(text, "a", encoding="utf-8") as f:
        f.write("\n".join(EXTRA_LINES) + "\n")
    spm = {}
    for kind in ("unigram", "bpe"):
        spm[kind] = os.path.join(work, f"spm_{kind}.model")
        run(TUPE, "vocab", "--vocab.input", text, "--vocab.model", spm[kind], "--vocab.vocab_size", "2000",
            "--vocab.model_type", kind)
    for label, kind, vocab, lower in (("WordPiece uncased", "wordpiece", VOCAB, "true"),
                                      ("WordPiece, do_lower_case false", "wordpiece", VOCAB, "false"),
                                      ("SentencePiece unigram", "sentencepiece", spm["unigram"], "true"),
                                      ("SentencePiece BPE", "sentencepiece", spm["bpe"], "true")):
        print(f"\n=== {label}")
        d = os.path.join(work, "ckpt_" + label.replace(" ", "_").replace(",", ""))
        run(FIXTURE, "make", d, "tupe-relative", "init", vocab)
        out = d + "_hf"
        shutil.rmtree(out, ignore_errors=True)
        run(TUPE, "export", "--checkpoint", d, "--output", out, "--vocab", vocab, "--lower-case", lower)
        ref_path = d + "_ids.json"
        run(FIXTURE, "tokenize", kind, vocab, lower, text, ref_path)
        ref = json.load(open(ref_path))
        # trust_remote_code: AutoTokenizer reads config.json (TupeConfig) first; without it
        # transformers asks whether to run that code, then loads the same tokenizer.
        tok = AutoTokenizer.from_pretrained(out, trust_remote_code=True)
        got = tok(ref["lines"], add_special_tokens=False)["input_ids"]
        bad = [i for i, (a, b) in enumerate(zip(got, ref["ids"])) if a != b]
        for i in bad[:3]:
            print(f"  line {i}: {ref['lines'][i]!r}\n    transformers {tok.convert_ids_to_tokens(got[i])}\n"
                  f"    tupe         {tok.convert_ids_to_tokens(ref['ids'][i])}")
        check(not bad, f"{label}: AutoTokenizer ({type(tok).__name__}) ids equal tupe's on {len(got)} lines "
                       f"({sum(map(len, got))} tokens); {len(bad)} differ")
        sp = ref["special"]
        pair = tok("a b", "c")
        a, c = tok("a b", add_special_tokens=False)["input_ids"], tok("c", add_special_tokens=False)["input_ids"]
        check(pair["input_ids"] == [sp["cls"], *a, sp["sep"], *c, sp["sep"]], "pairs: [CLS] A [SEP] B [SEP]")
        check(tok.mask_token_id == sp["mask"] and tok.pad_token_id == sp["pad"], "[MASK] and [PAD] ids")
        # predict's fill-mask names each token by its vocabulary entry ("##ing", "▁the"), as
        # transformers' convert_ids_to_tokens does.
        lines_path, fill = os.path.join(work, "fill_lines.txt"), d + "_fill.jsonl"
        with open(lines_path, "w", encoding="utf-8") as f:
            f.write("the [MASK] of the city .\n")
        run(TUPE, "predict", "--checkpoint", d, "--vocab", vocab, "--lower-case", lower, "--mode", "fill-mask",
            "--input", lines_path, "--output", fill, "--device", "cpu", "--top-k", "200")
        # (An "init" model's vocab_size exceeds a small SentencePiece vocabulary: ids past it
        # name no entry, "" here.)
        preds = [p for r in map(json.loads, open(fill, encoding="utf-8")) for m in r["masks"] for p in m["predictions"]
                 if p["token_id"] < len(tok)]
        check(preds, f"{label}: fill-mask predicted tokens of the vocabulary")
        got_tokens = [p["token"] for p in preds]
        check(got_tokens == tok.convert_ids_to_tokens([p["token_id"] for p in preds]),
              f"{label}: predict's tokens {got_tokens} are the vocabulary's entries")


if __name__ == "__main__":
    check_name, workdir = sys.argv[1], sys.argv[2]
    shutil.rmtree(workdir, ignore_errors=True)  # a fresh folder per run: outputs must not exist yet
    os.makedirs(workdir)
    start = time.time()
    {"pretrained": pretrained, "finetuned": finetuned, "tokenizers": tokenizers}[check_name](workdir, *sys.argv[3:])
    print(f"all checks passed ({time.time() - start:.1f} s)")
