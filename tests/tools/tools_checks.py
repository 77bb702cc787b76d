"""End-to-end checks of `tupe export` and `tupe analyze` on tiny checkpoints from tools_fixture.

Usage: tools_checks.py CHECK WORKDIR   with CHECK one of
  export_hf           BERT-A -> HF folder; transformers' BertForMaskedLM logits == tupe's (1e-5, fp32)
  export_tupe         TUPE-R --format tupe -> safetensors + JSON naming every tensor; tensors bit-identical
  analyze_sinusoidal  probes on a sinusoidal position table (near-zero errors) vs the random
                      init table (large errors); BERT-A terms vs a float64 numpy re-computation;
                      PNG sizes from their IHDR headers; curves.csv vs the JSONL written here
  analyze_tupe        TUPE-R heatmap input: the [CLS] reset rows/columns are constant
  analyze_bert_ad     BERT-A^d: its first-layer position terms vs a float64 numpy re-computation
  analyze_encodings   RoPE, ALiBi, NoPE: their positional terms vs numpy; no position table, no probes
  analyze_compare     `tupe analyze --run`: seed means and bands, final losses and steps to reach
                      the reference's final loss against the closed form of piecewise-linear
                      curves written here; a resumed run's repeated step; one-line errors
  errors              one-line errors: hf-bert format for TUPE refused with the reason, output exists,
                      vocabulary of another checkpoint, malformed metrics line
Environment: TUPE_BIN (tupe), TUPE_TOOLS_FIXTURE (tools_fixture), TUPE_SHARED_DATA.
Fails (never skips) when torch, transformers, safetensors or numpy is missing.
"""
import json
import os
import shutil
import struct
import sys

import numpy as np
from safetensors.numpy import load_file
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from script_checks import check, run  # noqa: E402

TUPE = os.environ["TUPE_BIN"]
FIXTURE = os.environ["TUPE_TOOLS_FIXTURE"]
VOCAB = os.path.join(os.environ["TUPE_SHARED_DATA"], "vocab", "bert-base-uncased-vocab.txt")
CASED_VOCAB = os.path.join(os.environ["TUPE_SHARED_DATA"], "vocab", "bert-base-cased-vocab.txt")


def make(work, name, variant, table):
    d = os.path.join(work, name)
    shutil.rmtree(d, ignore_errors=True)
    run(FIXTURE, "make", d, variant, table, VOCAB)
    return os.path.join(d, "step_00000100")


def png_size(path):
    with open(path, "rb") as f:
        head = f.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n", path
    return struct.unpack(">II", head[16:24])


def export_hf(work):
    import torch
    from transformers import BertForMaskedLM
    ckpt = make(work, "bert_a", "bert-absolute", "init")
    ref = os.path.join(work, "ref.safetensors")
    run(FIXTURE, "logits", ckpt, ref)
    out = os.path.join(work, "hf")
    p = run(TUPE, "export", "--checkpoint", os.path.dirname(ckpt), "--output", out, "--vocab", VOCAB)
    check("format hf" in p.stdout, "BERT-A exported in HF format")
    model, info = BertForMaskedLM.from_pretrained(out, output_loading_info=True, attn_implementation="eager")
    missing = [k for k in info["missing_keys"] if "decoder" not in k]
    check(not missing and not info["unexpected_keys"] and not info["mismatched_keys"],
          f"loaded strictly (missing {info['missing_keys']}, unexpected {info['unexpected_keys']})")
    model.eval()
    check(torch.equal(model.cls.predictions.decoder.weight, model.bert.embeddings.word_embeddings.weight),
          "decoder tied to the word embedding")
    r = load_file(ref)
    with torch.no_grad():
        logits = model(input_ids=torch.from_numpy(r["input_ids"]),
                       attention_mask=torch.from_numpy(r["attention_mask"])).logits
    ours = torch.from_numpy(r["logits"]).view(logits.shape)
    diff = (logits - ours).abs().max().item()
    print(f"max |HF - tupe| logit difference: {diff:.3g} (logit scale {ours.abs().max().item():.3g})")
    check(diff < 1e-5, "MLM logits within 1e-5 (fp32)")
    check(open(os.path.join(out, "vocab.txt"), "rb").read() == open(VOCAB, "rb").read(), "vocab.txt copied")
    cfg = json.load(open(os.path.join(out, "config.json")))
    check(cfg["architectures"] == ["BertForMaskedLM"] and cfg["model_type"] == "bert", "config.json is a BertConfig")
    from transformers import BertTokenizer
    tok = BertTokenizer.from_pretrained(out)
    check(tok.convert_tokens_to_ids("[MASK]") == 103, "BertTokenizer loads the exported vocabulary")


def export_tupe(work):
    ckpt = make(work, "tupe_r", "tupe-relative", "init")
    out = os.path.join(work, "tupe")
    p = run(TUPE, "export", "--checkpoint", ckpt, "--output", out, "--vocab", VOCAB, "--format", "tupe")
    check("format tupe" in p.stdout and "tupe layout" in p.stdout, "TUPE-R exported in tupe format")
    cfg = json.load(open(os.path.join(out, "config.json")))
    exported = load_file(os.path.join(out, "model.safetensors"))
    saved = load_file(os.path.join(ckpt, "model.safetensors"))
    check(cfg["format"] == "tupe-model" and cfg["position_encoding"] == "tupe-relative", "config.json format/variant")
    check(sorted(cfg["tensors"]) == sorted(exported) == sorted(saved), "config.json names every tensor")
    check(all(v["meaning"] for v in cfg["tensors"].values()), "every tensor has a meaning")
    check(all(list(exported[k].shape) == cfg["tensors"][k]["shape"] for k in exported), "shapes documented")
    check(all(np.array_equal(exported[k], saved[k].astype(np.float32)) for k in saved), "tensors bit-identical")
    check("encoder.positional.table.weight" in exported and "encoder.positional.relative_bias.weight" in exported,
          "TUPE-R positional tensors present")


def write_metrics(ckpt):
    d = os.path.join(os.path.dirname(ckpt), "metrics")
    os.makedirs(d, exist_ok=True)
    rows = []
    with open(os.path.join(d, "rank_0.jsonl"), "w") as f:
        for step in range(10, 201, 10):
            rec = {"step": step, "loss": 10.0 - step / 40.0, "lr": 1e-3 * min(1.0, step / 20.0), "grad_norm": 1.0}
            if step % 100 == 0:
                rec["validation_loss"] = 9.0 - step / 50.0
            rows.append(rec)
            f.write(json.dumps(rec) + "\n")
    return rows


def analyze_sinusoidal(work):
    results = {}
    for table in ("sinusoidal", "init"):
        ckpt = make(work, f"bert_a_{table}", "bert-absolute", table)
        rows = write_metrics(ckpt)
        out = os.path.join(work, f"analysis_{table}")
        shutil.rmtree(out, ignore_errors=True)
        p = run(TUPE, "analyze", "--checkpoint", ckpt, "--output", out)
        check("position regression" in p.stdout, "probe table printed")
        results[table] = json.load(open(os.path.join(out, "analysis.json")))["probes"]
    s, r = results["sinusoidal"], results["init"]
    print(json.dumps(results, indent=1))
    check(s["position_regression"]["test"] < 0.05, f"sinusoidal: held-out regression MAE {s['position_regression']['test']:.3g} < 0.05")
    check(s["pairwise_order"]["test"] < 0.01, f"sinusoidal: held-out order error {s['pairwise_order']['test']:.3g} < 0.01")
    check(r["position_regression"]["test"] > 10, f"random table: regression MAE {r['position_regression']['test']:.3g} > 10")
    check(r["pairwise_order"]["test"] > 0.1, f"random table: order error {r['pairwise_order']['test']:.3g} > 0.1")

    # The BERT-A terms against a float64 re-computation from the checkpoint's tensors.
    out = os.path.join(work, "analysis_sinusoidal")
    w = {k: v.astype(np.float64) for k, v in load_file(os.path.join(work, "bert_a_sinusoidal", "step_00000100",
                                                                     "model.safetensors")).items()}
    terms = load_file(os.path.join(out, "positional.safetensors"))
    H, L, dh = 4, 128, 8
    pos = w["encoder.embeddings.position.weight"][:L]
    wq, bq = w["encoder.layers.0.attention.query.weight"], w["encoder.layers.0.attention.query.bias"]
    wk, bk = w["encoder.layers.0.attention.key.weight"], w["encoder.layers.0.attention.key.bias"]
    wbar = w["encoder.embeddings.word.weight"].mean(0)
    qp, kp = (pos @ wq.T).reshape(L, H, dh), (pos @ wk.T).reshape(L, H, dh)
    qw, kw = (wbar @ wq.T + bq).reshape(H, dh), (wbar @ wk.T + bk).reshape(H, dh)
    pp = np.einsum("ihd,jhd->hij", qp, kp) / np.sqrt(dh)
    wp = np.einsum("hd,jhd->hj", qw, kp) / np.sqrt(dh)
    pw = np.einsum("ihd,hd->hi", qp, kw) / np.sqrt(dh)
    for name, want in (("positional_term", pp), ("word_to_position", wp), ("position_to_word", pw)):
        got = terms[name]
        err = np.abs(got - want).max()
        check(got.shape == want.shape and err < 1e-4 * max(1.0, np.abs(want).max()),
              f"{name} {got.shape} matches float64 numpy (max err {err:.2g})")
    table = load_file(os.path.join(out, "position_table.safetensors"))
    check(np.array_equal(table["positions"], np.arange(128)), "probe positions 0..127")

    # PNGs: present, non-trivial, the pixel size of figsize x 100 dpi.
    for name, size in (("positional_heads.png", (1200, 300)), ("word_to_position.png", (800, 600)),
                       ("curves.png", (1000, 400))):
        path = os.path.join(out, name)
        check(os.path.exists(path) and os.path.getsize(path) > 10000, f"{name}: {os.path.getsize(path)} bytes")
        check(png_size(path) == size, f"{name}: {png_size(path)} pixels == {size}")
    # curves.csv against the records written.
    lines = open(os.path.join(out, "curves.csv")).read().splitlines()
    check(lines[0] == "step,loss,lr,validation_loss" and len(lines) == 1 + len(rows), "curves.csv header and rows")
    for line, rec in zip(lines[1:], rows):
        step, loss, lr, vl = line.split(",")
        ok = int(step) == rec["step"] and abs(float(loss) - rec["loss"]) < 1e-6 and abs(float(lr) - rec["lr"]) < 1e-12
        ok = ok and ((vl == "") == ("validation_loss" not in rec))
        check(ok, f"curves.csv step {rec['step']}")


def analyze_tupe(work):
    ckpt = make(work, "tupe_r", "tupe-relative", "init")
    out = os.path.join(work, "analysis")
    shutil.rmtree(out, ignore_errors=True)
    run(TUPE, "analyze", "--checkpoint", ckpt, "--output", out, "--positions", "64")
    t = load_file(os.path.join(out, "positional.safetensors"))["positional_term"]
    check(t.shape == (4, 64, 64), f"positional term shape {t.shape}")
    check(np.ptp(t[:, 0, :], axis=1).max() < 1e-6, "[CLS] row reset: constant per head (theta_1)")
    check(np.ptp(t[:, 1:, 0], axis=1).max() < 1e-6, "[CLS] column reset: constant per head (theta_2)")
    check(np.ptp(t[:, 1:, 1:], axis=(1, 2)).min() > 1e-3, "other entries vary")
    check(os.path.getsize(os.path.join(out, "positional_heads.png")) > 10000, "heatmap PNG written")
    check(not os.path.exists(os.path.join(out, "word_to_position.png")), "no BERT-A mixed terms for TUPE")
    table = load_file(os.path.join(out, "position_table.safetensors"))
    check(table["table"].shape == (127, 32) and np.array_equal(table["positions"], np.arange(1, 128)),
          "TUPE probe rows: positions 1..127 (rows 2..128; position 0 is the untied [CLS])")


def analyze_bert_ad(work):
    """BERT-A^d: the first layer's three position terms against a float64 numpy re-computation
    from the checkpoint's tensors (its own position LN and projections, scale 1/sqrt(4 d_h));
    the probes run on its table (a sinusoidal one: near-zero errors), rows 0..127."""
    ckpt = make(work, "bert_ad", "bert-absolute-untied", "sinusoidal")
    out = os.path.join(work, "analysis")
    shutil.rmtree(out, ignore_errors=True)
    p = run(TUPE, "analyze", "--checkpoint", ckpt, "--output", out)
    check("position regression" in p.stdout, "probe table printed")
    w = {k: v.astype(np.float64) for k, v in load_file(os.path.join(ckpt, "model.safetensors")).items()}
    check("encoder.embeddings.position.weight" not in w, "no input position embedding (word-only input)")
    terms = load_file(os.path.join(out, "positional.safetensors"))
    H, L, dh, eps = 4, 128, 8, 1e-12
    t = w["encoder.positional.table.weight"][:L]
    mu, var = t.mean(1, keepdims=True), t.var(1, keepdims=True)
    p_ln = (t - mu) / np.sqrt(var + eps) * w["encoder.positional.norm.weight"] + w["encoder.positional.norm.bias"]
    pq = (p_ln @ w["encoder.positional.query.weight"].T + w["encoder.positional.query.bias"]).reshape(L, H, dh)
    pk = (p_ln @ w["encoder.positional.key.weight"].T + w["encoder.positional.key.bias"]).reshape(L, H, dh)
    wq, bq = w["encoder.layers.0.attention.query.weight"], w["encoder.layers.0.attention.query.bias"]
    wk, bk = w["encoder.layers.0.attention.key.weight"], w["encoder.layers.0.attention.key.bias"]
    wbar = w["encoder.embeddings.word.weight"].mean(0)
    qw, kw = (wbar @ wq.T + bq).reshape(H, dh), (wbar @ wk.T + bk).reshape(H, dh)
    s = 1 / np.sqrt(4 * dh)
    want = {"positional_term": np.einsum("ihd,jhd->hij", pq, pk) * s,
            "word_to_position": np.einsum("hd,jhd->hj", qw, pk) * s,
            "position_to_word": np.einsum("ihd,hd->hi", pq, kw) * s}
    for name, ref in want.items():
        got = terms[name]
        err = np.abs(got - ref).max()
        check(got.shape == ref.shape and err < 1e-4 * max(1.0, np.abs(ref).max()),
              f"{name} {got.shape} matches float64 numpy (max err {err:.2g})")
    table = load_file(os.path.join(out, "position_table.safetensors"))
    check(table["table"].shape == (128, 32) and np.array_equal(table["positions"], np.arange(128)),
          "BERT-A^d probe rows: positions 0..127 (its position table, no [CLS] row)")
    probes = json.load(open(os.path.join(out, "analysis.json")))["probes"]
    check(probes["position_regression"]["test"] < 0.05, f"sinusoidal table: regression MAE {probes['position_regression']['test']:.3g}")
    for name in ("positional_heads.png", "word_to_position.png"):
        check(os.path.getsize(os.path.join(out, name)) > 10000, f"{name} written")


def analyze_encodings(work):
    """RoPE, ALiBi, NoPE: the heatmap input against numpy from the papers and the checkpoint's
    tensors (RoPE: the first layer's mean-word query and key rotated pair by pair to every
    position; ALiBi: -m_h |i - j| with 4 heads' slopes 2^-2, 2^-4, 2^-6, 2^-8; NoPE: zero); no
    position table is written, and the probe table says why."""
    H, L, dh = 4, 64, 8
    for variant in ("rope", "alibi", "none"):
        ckpt = make(work, variant, variant, "init")
        out = os.path.join(work, f"analysis-{variant}")
        shutil.rmtree(out, ignore_errors=True)
        p = run(TUPE, "analyze", "--checkpoint", ckpt, "--output", out, "--positions", str(L))
        check(f"{variant} learns no position vectors" in p.stdout, f"{variant}: the probe table says why it is empty")
        got = load_file(os.path.join(out, "positional.safetensors"))["positional_term"]
        if variant == "rope":
            w = {k: v.astype(np.float64) for k, v in load_file(os.path.join(ckpt, "model.safetensors")).items()}
            wbar = w["encoder.embeddings.word.weight"].mean(0)
            q = (wbar @ w["encoder.layers.0.attention.query.weight"].T + w["encoder.layers.0.attention.query.bias"])
            k = (wbar @ w["encoder.layers.0.attention.key.weight"].T + w["encoder.layers.0.attention.key.bias"])
            theta = 10000.0 ** (-2 * np.arange(dh // 2) / dh)

            def rotated(v):  # (H, dh) -> (H, L, dh): pair (i, i + dh/2) turned by t theta_i
                a, b = v.reshape(H, dh)[:, :dh // 2], v.reshape(H, dh)[:, dh // 2:]
                c, s = np.cos(np.outer(np.arange(L), theta)), np.sin(np.outer(np.arange(L), theta))
                return np.concatenate([a[:, None] * c - b[:, None] * s, b[:, None] * c + a[:, None] * s], axis=2)
            want = np.einsum("hid,hjd->hij", rotated(q), rotated(k)) / np.sqrt(dh)
        elif variant == "alibi":
            slopes = np.array([2.0 ** -2, 2.0 ** -4, 2.0 ** -6, 2.0 ** -8])
            dist = np.abs(np.arange(L)[:, None] - np.arange(L)[None, :])
            want = -slopes[:, None, None] * dist
        else:
            want = np.zeros((H, L, L))
        err = np.abs(got - want).max()
        check(got.shape == want.shape and err <= 1e-5 * max(1.0, np.abs(want).max()),
              f"{variant}: positional term {got.shape} matches numpy (max err {err:.2g})")
        check(not os.path.exists(os.path.join(out, "position_table.safetensors")), f"{variant}: no position table")
        check(json.load(open(os.path.join(out, "analysis.json")))["probes"] == {}, f"{variant}: no probes")
        check(os.path.getsize(os.path.join(out, "positional_heads.png")) > 5000, f"{variant}: heatmap written")


def write_curve(path, points, extra=()):
    """A metrics JSONL with training records between the validation records (as a run logs)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        for s, v in list(extra) + list(points):
            f.write(json.dumps({"step": s, "loss": v + 0.3, "lr": 1e-3}) + "\n")
            f.write(json.dumps({"step": s, "validation_loss": v}) + "\n")


def analyze_compare(work):
    steps = range(100, 1001, 100)
    # A (the reference): seeds v = 8 - 0.002 s and v = 8.2 - 0.002 s; B: v = 8 - 0.004 s; C flat at 7.
    # Seed 1 of A was resumed: step 300 appears first with a stale value, then the real one.
    a1 = os.path.join(work, "A-seed1", "checkpoints")  # a checkpoint.dir: metrics/rank_0.jsonl inside
    write_curve(os.path.join(a1, "metrics", "rank_0.jsonl"), [(s, 8 - 0.002 * s) for s in steps], extra=[(300, 9.9)])
    a2 = os.path.join(work, "A-seed2.jsonl")
    write_curve(a2, [(s, 8.2 - 0.002 * s) for s in steps])
    b = os.path.join(work, "B.jsonl")
    write_curve(b, [(s, 8 - 0.004 * s) for s in steps])
    c = os.path.join(work, "C.jsonl")
    write_curve(c, [(s, 7.0) for s in steps])
    out = os.path.join(work, "cmp")
    p = run(TUPE, "analyze", "--run", f"A={a1}", "--run", f"B={b}", "--run", f"A={a2}", "--run", f"C={c}",
            "--output", out)
    info = json.load(open(os.path.join(out, "compare.json")))
    # The closed form: target = mean of A's finals = (6.0 + 6.2) / 2; a line v0 - k s crosses it at (v0 - target) / k.
    target = ((8 - 2.0) + (8.2 - 2.0)) / 2
    check(abs(info["target"] - target) < 1e-12 and info["reference"] == "A", f"target {info['target']} == {target}")
    m = {x["name"]: x for x in info["models"]}
    check([x["name"] for x in info["models"]] == ["A", "B", "C"], "models in the order first named")
    check(m["A"]["seeds"] == 2 and m["B"]["seeds"] == 1, "runs of one name are its seeds")
    fa = m["A"]["final_validation_loss"]
    check(abs(fa["min"] - 6.0) < 1e-12 and abs(fa["max"] - 6.2) < 1e-12 and abs(fa["mean"] - 6.1) < 1e-12,
          "A's final loss mean and seed span")
    reach_a = [r["steps_to_reach"] for r in m["A"]["runs"]]
    check(abs(reach_a[0] - (8 - target) / 0.002) < 1e-6 and reach_a[1] is None,
          f"A's seeds reach the target at {reach_a} (closed form {(8 - target) / 0.002:.1f}, never)")
    check(m["A"]["seeds_reaching"] == 1 and abs(m["B"]["steps_to_reach"] - (8 - target) / 0.004) < 1e-6,
          f"B reaches it at {m['B']['steps_to_reach']} (closed form {(8 - target) / 0.004})")
    check(m["C"]["steps_to_reach"] is None, "C never reaches it")
    curve_a = {r[0]: r[1:] for r in m["A"]["curve"]}
    check(abs(curve_a[300][0] - (8 - 0.6 + 8.2 - 0.6) / 2) < 1e-12 and abs(curve_a[300][1] - 7.4) < 1e-12,
          "the resumed run's repeated step: the last record counts (mean and band at step 300)")
    md = open(os.path.join(out, "compare.md")).read()
    check("| A | 2 | 1000 | 6.1000 | 6.0000..6.2000 | (the reference) | - |" in md
          and "| B | 1 | 1000 | 4.0000 | 4.0000 | 475 | 48% |" in md
          and "| C | 1 | 1000 | 7.0000 | 7.0000 | not reached | - |" in md,
          "compare.md rows: no ratio of the reference against itself")
    # A's mean curve 8.1 - 0.002 s falls from 7.1 to 6.1 over its second half: 14.1%, descending.
    check(info["reference_descending"] and abs(info["reference_second_half_drop"] - 1.0 / 7.1) < 1e-12,
          f"the reference's second-half drop {info['reference_second_half_drop']:.4f} == 1/7.1")
    # Matched steps (10/30/50/100% of step 1000), closed forms of the lines above.
    for name, v in (("A", lambda s: 8.1 - 0.002 * s), ("B", lambda s: 8 - 0.004 * s), ("C", lambda s: 7.0)):
        got = m[name]["matched_steps"]
        want = {"0.1": v(100), "0.3": v(300), "0.5": v(500), "1.0": v(1000)}
        check(all(abs(got[k] - want[k]) < 1e-9 for k in want), f"{name} at matched steps {got} == {want}")
    check("| B | 7.6000 | 6.8000 | 6.0000 | 4.0000 |" in md, "the matched-steps table")
    check(p.stdout.startswith(md), "the table is printed")
    rows = open(os.path.join(out, "compare.csv")).read().strip().splitlines()
    check(rows[0] == "name,run,step,validation_loss" and len(rows) == 1 + 4 * 10, "compare.csv: every evaluation once")
    check(png_size(os.path.join(out, "validation.png")) == (800, 500), "validation.png 800 x 500")
    p = run(TUPE, "analyze", "--run", f"A={a1}", "--run", f"B={b}", "--reference", "B", "--output", out)
    info = json.load(open(os.path.join(out, "compare.json")))
    check(abs(info["target"] - 4.0) < 1e-12 and info["models"][0]["steps_to_reach"] is None, "--reference B: A never reaches 4.0")
    # A reference on a plateau (C is flat): no steps to its final loss; fixed losses instead.
    p = run(TUPE, "analyze", "--run", f"C={c}", "--run", f"A={a1}", "--run", f"B={b}", "--run", f"A={a2}",
            "--losses", "7.5,5", "--output", out)
    info = json.load(open(os.path.join(out, "compare.json")))
    md = open(os.path.join(out, "compare.md")).read()
    check(not info["reference_descending"] and "| B | 1 | 1000 | 4.0000 | 4.0000 | (the reference is on a plateau) | - |" in md,
          "a flat reference: no steps to its final loss")
    m = {x["name"]: x for x in info["models"]}
    # B = 8 - 0.004 s reaches 7.5 at 125 and 5 at 750; A's seeds 8 - 0.002 s (250, never 5 by step
    # 1000? it reaches 6.0 only) and 8.2 - 0.002 s (350): 7.5 at their mean 300, 5 by neither.
    check(abs(m["B"]["steps_to_losses"]["7.500"] - 125) < 1e-9 and abs(m["B"]["steps_to_losses"]["5.000"] - 750) < 1e-9,
          f"B's steps to 7.5 and 5: {m['B']['steps_to_losses']}")
    check(abs(m["A"]["steps_to_losses"]["7.500"] - 300) < 1e-9 and m["A"]["steps_to_losses"]["5.000"] is None,
          f"A's steps to 7.5 and 5: {m['A']['steps_to_losses']}")
    check("| A | 300 | not reached |" in md and "| C | 100 | not reached |" in md, "the fixed-losses table (C is at 7 from its first point)")

    def refused(args, *parts):
        target_out = os.path.join(work, "refused")
        p = run(TUPE, "analyze", *args, "--output", target_out, ok=False)
        lines = p.stderr.strip().splitlines()
        check(p.returncode == 1 and len(lines) == 1 and all(x in lines[0] for x in parts) and not os.path.exists(target_out),
              f"one-line error with {parts}, nothing written")

    no_val = os.path.join(work, "no_val.jsonl")
    with open(no_val, "w") as f:
        f.write('{"step": 10, "loss": 3.0}\n')
    refused(["--run", f"A={a2}", "--run", f"D={no_val}"], no_val, "no \"validation_loss\" record", "run D")
    refused(["--run", f"A={a2}", "--reference", "Z"], "--reference Z", "not one of the --run names")
    refused(["--run", f"A={work}"], f"--run A={work}", "no metrics/rank_0.jsonl")
    refused(["--run", "A"], "--run 'A'", "expected NAME=PATH")
    refused(["--run", f"A={a2}", "--checkpoint", a1], "give one of --checkpoint", "--run", "--glue")


def write_glue_results(path, step, scores):
    """A results.json as `tupe finetune` writes it, reduced to what --glue reads: per task a
    grid of two LRs whose best holds the reported median."""
    os.makedirs(path, exist_ok=True)
    tasks = [{"task": t, "best_lr": 3e-4, "by_lr": [{"lr": 1e-4, "median_score": v - 0.1}, {"lr": 3e-4, "median_score": v}]}
             for t, v in scores.items()]
    with open(os.path.join(path, "results.json"), "w") as f:
        json.dump({"format": "tupe-glue-results", "format_version": 1, "pretrain_steps": step, "tasks": tasks}, f)


def analyze_glue(work):
    """`tupe analyze --glue`: the GLUE average per (name, step) is the mean of the reported
    (best-LR median) scores x100, one folder per task or one for several; a missing task flags
    the point; a damaged file is one line."""
    a = {300: {"CoLA": 0.10, "SST-2": 0.70}, 1000: {"CoLA": 0.20, "SST-2": 0.80}}
    b = {300: {"CoLA": 0.05, "SST-2": 0.65}, 1000: {"CoLA": 0.30}}
    args = []
    for name, points in (("A", a), ("B", b)):
        for step, scores in points.items():
            for task, v in scores.items():  # one folder per task, as bench/paper lays them out
                d = os.path.join(work, name, f"step{step}", task)
                write_glue_results(d, step, {task: v})
                args += ["--glue", f"{name}={d}"]
    out = os.path.join(work, "curve")
    p = run(TUPE, "analyze", *args, "--output", out)
    info = json.load(open(os.path.join(out, "glue_curve.json")))
    got = {m["name"]: {pt["step"]: (pt["average"], pt["partial"]) for pt in m["points"]} for m in info["models"]}
    want = {n: {st: (100 * sum(sc.values()) / len(sc), len(sc) < 2) for st, sc in pts.items()} for n, pts in (("A", a), ("B", b))}
    check(list(got) == ["A", "B"] and all(abs(got[n][st][0] - want[n][st][0]) < 1e-9 and got[n][st][1] == want[n][st][1]
                                          for n in want for st in want[n]), f"averages {got} == {want}")
    md = open(os.path.join(out, "glue_curve.md")).read()
    check("| A | 1000 | 50.00 | CoLA 20.0, SST-2 80.0 |" in md and "| B | 1000 | 30.00 (fewer tasks) | CoLA 30.0 |" in md,
          "glue_curve.md rows")
    check(p.stdout.startswith(md), "the table is printed")
    check(png_size(os.path.join(out, "glue_curve.png")) == (800, 500), "glue_curve.png 800 x 500")
    bad = os.path.join(work, "bad")
    os.makedirs(bad)
    open(os.path.join(bad, "results.json"), "w").write('{"format": "tupe-glue-results", "tasks": [')
    p = run(TUPE, "analyze", "--glue", f"A={bad}", "--output", os.path.join(work, "bad-out"), ok=False)
    lines = p.stderr.strip().splitlines()
    check(p.returncode == 1 and len(lines) == 1 and os.path.join(bad, "results.json") + ": not JSON" in lines[0],
          f"a damaged results.json: one line naming it ({lines})")
    check(not os.path.exists(os.path.join(work, "bad-out")), "nothing written for a damaged file")
    twice = os.path.join(work, "A", "step300", "CoLA")
    p = run(TUPE, "analyze", "--glue", f"A={twice}", "--glue", f"A={twice}", "--output", os.path.join(work, "t"), ok=False)
    lines = p.stderr.strip().splitlines()
    check(p.returncode == 1 and len(lines) == 1 and "CoLA at step 300 of A is given twice" in lines[0],
          f"a task given twice at one step: one line ({lines})")


def errors(work):
    ckpt = make(work, "tupe_r", "tupe-relative", "init")
    out = os.path.join(work, "out")
    shutil.rmtree(out, ignore_errors=True)

    def one_line_error(p, *parts):
        lines = p.stderr.strip().splitlines()
        check(p.returncode == 1 and len(lines) == 1 and all(x in lines[0] for x in parts),
              f"one-line error with {parts}")

    p = run(TUPE, "export", "--checkpoint", ckpt, "--output", out, "--format", "hf-bert", ok=False)
    one_line_error(p, "step_00000100", "cannot export to HuggingFace BertForMaskedLM", "tupe-relative", "--format hf ")
    check(not os.path.exists(out) and not any(n.startswith("out.tmp") for n in os.listdir(work)), "nothing left behind")
    os.makedirs(out)  # an empty folder is taken; one that holds anything is refused
    run(TUPE, "export", "--checkpoint", ckpt, "--output", out)
    check(os.path.isfile(os.path.join(out, "config.json")), "export into an existing empty folder")
    p = run(TUPE, "export", "--checkpoint", ckpt, "--output", out, ok=False)
    one_line_error(p, out, "a folder that is not empty")
    shutil.rmtree(out)
    p = run(TUPE, "export", "--checkpoint", ckpt, "--output", out, "--vocab", CASED_VOCAB, ok=False)
    one_line_error(p, CASED_VOCAB, "differs from the checkpoint's")
    check(not os.path.exists(out), "nothing written on a vocabulary mismatch")
    for option, value in (("--format", "onnx"), ("--lower-case", "maybe")):
        p = run(TUPE, "export", "--checkpoint", ckpt, "--output", out, option, value, ok=False)
        one_line_error(p, option, "expected", f"got '{value}'")
    check(not os.path.exists(out) and not any(n.startswith("out.tmp") for n in os.listdir(work)), "nothing left behind")
    bad = os.path.join(work, "bad.jsonl")
    with open(bad, "w") as f:
        f.write('{"step": 10, "loss": 3.0, "lr": 0.001}\n\n{"step": "x"}\n')
    p = run(TUPE, "analyze", "--checkpoint", ckpt, "--output", os.path.join(work, "an"), "--metrics", bad, ok=False)
    one_line_error(p, bad + ":3:", "\"step\" missing or not an integer")
    check(not os.path.exists(os.path.join(work, "an")), "no partial analysis on a bad metrics file")


if __name__ == "__main__":
    check_name, workdir = sys.argv[1], sys.argv[2]
    shutil.rmtree(workdir, ignore_errors=True)  # a fresh folder per run: outputs must not exist yet
    os.makedirs(workdir)
    {"export_hf": export_hf, "export_tupe": export_tupe, "analyze_sinusoidal": analyze_sinusoidal, "analyze_encodings": analyze_encodings,
     "analyze_tupe": analyze_tupe, "analyze_bert_ad": analyze_bert_ad, "analyze_compare": analyze_compare,
     "analyze_glue": analyze_glue,
     "errors": errors}[check_name](workdir)
    print("all checks passed")
