"""End-to-end checks of starting from weights one has (`tupe pretrain --init-from`,
docs/warm-start.md) on real text (the WikiText-2 shards of pretrain_checks.py shards).

Usage: warm_start_checks.py CHECK WORKDIR
  hf         a Hugging Face BertForMaskedLM saved by transformers (tiny, random, BERT's uncased
             vocabulary) continued under mpirun -np 2 with configs/warm-start/continue-bert.ini:
             after one step at LR 1e-12 every encoder and MLM-head tensor of the checkpoint equals
             transformers' own (mapped by name here, 1e-6); the run records its origin (the SHA-256
             of model.safetensors computed here, the architecture) in trainer_state.json and
             effective_config.ini and its export's model card, carries the folder's vocabulary (read
             from tokenizer.json: transformers 5 saves no vocab.txt), and has the folder's shape;
             the same folder continued as TUPE-R with 256 positions: the table rows follow the
             retrofit and extension rules (row t + 1 = BERT's row t mod 128), U^Q = sqrt(2) W^Q_0,
             the relative bias 0; a BertModel folder (no head) runs with the notice of a fresh head
  resume     --init-from with --resume auto: an interrupted run continues from its checkpoint
             (same source); another source's weights over that folder are refused, naming
             train.init_from_sha256
  refusals   one line, a non-zero exit and no checkpoint folder for: a [model] key that
             contradicts the source (key, both values, source), a shorter max_positions, a file
             as --init-from, shards of another vocabulary, a pytorch_model.bin-only folder (with the
             conversion command, which then works), another model_type, a vocab.txt of another size
  two_phase  launch/two_phase.py with the toy presets under mpirun -np 2: phase 2 starts from phase
             1's last checkpoint (its origin: that step folder and the SHA-256 of its weights), its
             positions grow 64 -> 128, its optimizer and schedule are fresh (20 steps of its own);
             the same command again resumes both and changes nothing; --launcher slurm --dry-run
             prints phase 2's sbatch with afterok on phase 1
Environment: TUPE_BIN, TUPE_SOURCE_DIR, TUPE_SHARED_DATA.
"""
import configparser
import hashlib
import json
import math
import os
import shutil
import subprocess
import sys

import numpy as np
from safetensors.numpy import load_file

from pretrain_common import DATA, ENV, SRC, TUPE, error_lines, mpirun

PRESET = os.path.join(SRC, "configs", "warm-start", "continue-bert.ini")
VOCAB = os.path.join(DATA, "vocab", "bert-base-uncased-vocab.txt")


def fail(msg):
    sys.exit("FAILED: " + msg)


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def hf_folder(out, masked_lm=True, seed=1):
    """A tiny BERT saved by transformers itself, with BERT's uncased vocabulary (the shards')."""
    import torch
    from transformers import BertConfig, BertForMaskedLM, BertModel, BertTokenizerFast
    torch.manual_seed(seed)
    cfg = BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                     intermediate_size=64, max_position_embeddings=128, type_vocab_size=2)
    model = (BertForMaskedLM if masked_lm else BertModel)(cfg).eval()
    with torch.no_grad():  # weights away from their init, LayerNorms included
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    shutil.rmtree(out, ignore_errors=True)
    model.save_pretrained(out)
    BertTokenizerFast(vocab=VOCAB, do_lower_case=True).save_pretrained(out)
    # transformers 5 saves the tokenizer as tokenizer.json alone; tupe reads the vocabulary from
    # there. Folders of older versions have vocab.txt: the second folder of a kind gets one.
    if seed != 1:
        shutil.copy(VOCAB, os.path.join(out, "vocab.txt"))
    return {k: v.detach().numpy() for k, v in model.state_dict().items()}


def hf_to_tupe(name):
    """transformers' BERT name -> tupe's (written here from modeling_bert's layout)."""
    n = name[len("bert."):] if name.startswith("bert.") else name
    fixed = {"embeddings.word_embeddings.weight": "encoder.embeddings.word.weight",
             "embeddings.position_embeddings.weight": "encoder.embeddings.position.weight",
             "embeddings.token_type_embeddings.weight": "encoder.embeddings.segment.weight",
             "embeddings.LayerNorm.weight": "encoder.embeddings.norm.weight",
             "embeddings.LayerNorm.bias": "encoder.embeddings.norm.bias",
             "cls.predictions.transform.dense.weight": "mlm_head.dense.weight",
             "cls.predictions.transform.dense.bias": "mlm_head.dense.bias",
             "cls.predictions.transform.LayerNorm.weight": "mlm_head.norm.weight",
             "cls.predictions.transform.LayerNorm.bias": "mlm_head.norm.bias",
             "cls.predictions.bias": "mlm_head.bias"}
    if n in fixed:
        return fixed[n]
    if not n.startswith("encoder.layer."):
        return None
    parts = n.split(".")
    i, rest = parts[2], ".".join(parts[3:-1])
    table = {"attention.self.query": "attention.query", "attention.self.key": "attention.key",
             "attention.self.value": "attention.value", "attention.output.dense": "attention.output",
             "attention.output.LayerNorm": "attention_norm", "intermediate.dense": "ffn_in",
             "output.dense": "ffn_out", "output.LayerNorm": "ffn_norm"}
    return f"encoder.layers.{i}.{table[rest]}.{parts[-1]}"


def continue_args(work, ckpt, source, **overrides):
    opts = {"data.train_shards": f"{work}/../shards", "data.validation_shards": f"{work}/../shards",
            "data.global_batch_size": 8, "optimizer.warmup_steps": 0, "optimizer.total_steps": 4,
            "precision.precision": "fp32", "checkpoint.dir": ckpt, "checkpoint.every_steps": 1,
            "checkpoint.keep_last": 0, "train.micro_batch_size": 4, "train.log_every": 1, "train.threads": 1,
            "train.progress": "false", "train.eval_every": 0, "train.eval_batches": 2, "dist.timeout_s": 120}
    opts.update(overrides)
    args = ["pretrain", "--config", PRESET, "--init-from", source]
    for k, v in opts.items():
        args += [f"--{k}", str(v)]
    return args


def step_files(ckpt, step):
    d = os.path.join(ckpt, f"step_{step:08d}")
    return d, load_file(os.path.join(d, "model.safetensors")), json.load(open(os.path.join(d, "trainer_state.json")))


def check_hf(work):
    src = os.path.join(work, "hf_mlm")
    hf = hf_folder(src)
    ck = os.path.join(work, "continued")
    shutil.rmtree(ck, ignore_errors=True)
    p = mpirun(2, continue_args(work, ck, src, **{"optimizer.lr": 1e-12, "train.max_steps": 1}))
    d, w, st = step_files(ck, 1)
    worst, compared = 0.0, 0
    for name, value in hf.items():
        t = hf_to_tupe(name)
        if t is None:
            continue
        worst = max(worst, float(np.max(np.abs(w[t].astype(np.float64) - value))))
        compared += 1
    expected = {hf_to_tupe(n) for n in hf if hf_to_tupe(n)}
    if set(w) != expected:
        fail(f"the checkpoint's tensors differ from the HF model's: {sorted(set(w) ^ expected)[:6]}")
    if worst > 1e-6:
        fail(f"after one step at LR 1e-12 the weights are {worst:.3e} from transformers' (> 1e-6)")
    origin = st.get("origin", {})
    want = {"format": "hf-bert", "architecture": "BertForMaskedLM", "step": 0, "position_encoding": "bert-absolute",
            "max_positions": 128, "weights_sha256": sha256(os.path.join(src, "model.safetensors"))}
    if any(origin.get(k) != v for k, v in want.items()) or os.path.realpath(origin.get("path", "")) != os.path.realpath(src):
        fail(f"trainer_state origin {origin}, want {want} and path {src}")
    cfg = configparser.ConfigParser(interpolation=None)
    cfg.read(os.path.join(ck, "effective_config.ini"))
    shape = {"hidden_size": "32", "num_layers": "2", "num_heads": "4", "ffn_size": "64", "max_positions": "128",
             "type_vocab_size": "2", "position_encoding": "bert-absolute", "vocab_size": "30522"}
    got = {k: cfg["model"][k] for k in shape}
    if got != shape or cfg["train"]["init_from_sha256"] != want["weights_sha256"]:
        fail(f"effective_config.ini: model {got}, init_from_sha256 {cfg['train'].get('init_from_sha256')}")
    if open(os.path.join(d, "vocab.txt"), "rb").read() != open(VOCAB, "rb").read():
        fail("the checkpoint does not carry the folder's vocabulary (tokenizer.json's, as vocab.txt's bytes)")
    print(f"hf: {compared} tensors equal transformers' after one step at LR 1e-12 (max {worst:.2e}); origin and "
          "shape recorded")
    card = os.path.join(work, "exported")
    shutil.rmtree(card, ignore_errors=True)
    subprocess.run([TUPE, "export", "--checkpoint", ck, "--output", card], check=True, env=ENV, capture_output=True)
    text = open(os.path.join(card, "README.md")).read()
    if "initialised from" not in text or want["weights_sha256"][:16] not in text or "BertForMaskedLM" not in text:
        fail(f"the exported model card does not name the origin:\n{text[:3000]}")

    # The retrofit to TUPE-R with a longer table.
    rt = os.path.join(work, "retrofit")
    shutil.rmtree(rt, ignore_errors=True)
    mpirun(1, continue_args(work, rt, src, **{"optimizer.lr": 1e-12, "train.max_steps": 1,
                                              "model.position_encoding": "tupe-relative",
                                              "model.max_positions": 256}))
    _, w, st = step_files(rt, 1)
    table, pos = w["encoder.positional.table.weight"], hf["bert.embeddings.position_embeddings.weight"]
    if table.shape != (257, 32):
        fail(f"TUPE-R's table has shape {table.shape}, want (257, 32) (256 positions and the [CLS] row)")
    rows = [0] + [t % 128 for t in range(256)]  # row 0 = theta_1 from BERT's row 0; row t + 1 = position t
    d_table = float(np.max(np.abs(table - pos[rows])))
    d_query = float(np.max(np.abs(w["encoder.positional.query.weight"]
                                  - math.sqrt(2) * hf["bert.encoder.layer.0.attention.self.query.weight"])))
    d_wq = float(np.max(np.abs(w["encoder.layers.1.attention.query.weight"]
                               - math.sqrt(2) * hf["bert.encoder.layer.1.attention.self.query.weight"])))
    d_key = float(np.max(np.abs(w["encoder.positional.key.weight"] - hf["bert.encoder.layer.0.attention.self.key.weight"])))
    bias = float(np.max(np.abs(w["encoder.positional.relative_bias.weight"])))
    if max(d_table, d_query, d_wq, d_key, bias) > 1e-6 or "encoder.embeddings.position.weight" in w:
        fail(f"retrofit: table {d_table:.2e}, U^Q {d_query:.2e}, W^Q {d_wq:.2e}, U^K {d_key:.2e}, bias {bias:.2e}")
    if st["config"]["model.position_encoding"] != "tupe-relative" or st["config"]["model.untie_cls"] != "true":
        fail(f"retrofit: saved variant {st['config']['model.position_encoding']}, untie {st['config']['model.untie_cls']}")
    print("hf: the retrofit to TUPE-R with 256 positions follows its rules (1e-6)")

    enc = os.path.join(work, "hf_encoder")
    hf_folder(enc, masked_lm=False, seed=2)
    ek = os.path.join(work, "from_encoder")
    shutil.rmtree(ek, ignore_errors=True)
    p = mpirun(1, continue_args(work, ek, enc, **{"train.max_steps": 2}))
    if "the source has no MLM head: a fresh one" not in p.stdout or "finished at step 2" not in p.stderr + p.stdout:
        fail(f"a BertModel folder: no fresh-head notice or no finish:\n{p.stdout[-2000:]}")
    print("hf OK")


def check_resume(work):
    src = os.path.join(work, "hf_mlm")
    hf_folder(src)
    ck = os.path.join(work, "run")
    shutil.rmtree(ck, ignore_errors=True)
    mpirun(2, continue_args(work, ck, src, **{"optimizer.lr": 1e-4, "train.max_steps": 2}))
    p = mpirun(2, continue_args(work, ck, src, **{"optimizer.lr": 1e-4}))
    if "resumed from" not in p.stdout or "step_00000002 at step 2" not in p.stdout or "finished at step 4" not in p.stdout:
        fail(f"--init-from with --resume auto did not continue from step 2:\n{p.stdout[-2000:]}")
    other = os.path.join(work, "hf_other")
    hf_folder(other, seed=3)
    p = mpirun(1, continue_args(work, ck, other, **{"optimizer.lr": 1e-4, "optimizer.total_steps": 6}), check=False)
    err = error_lines(p)
    if p.returncode == 0 or len(err) != 1 or "train.init_from_sha256" not in err[0]:
        fail(f"another source over a run's checkpoints was not refused by train.init_from_sha256:\n{p.stderr[-2000:]}")
    print("resume OK")


def refused(work, args, parts, what, np_=1):
    ck = args[args.index("--checkpoint.dir") + 1] if "--checkpoint.dir" in args else None
    p = mpirun(np_, args, check=False)
    err = error_lines(p)
    if p.returncode == 0 or len(err) != 1 or any(x not in err[0] for x in parts):
        fail(f"{what}: want one error line with {parts}, got exit {p.returncode}:\n{p.stderr[-2000:]}")
    if ck and os.path.exists(ck) and os.listdir(ck):
        fail(f"{what}: the refused run left {sorted(os.listdir(ck))} in {ck}")
    print(f"refused ({what}): {err[0][:200]}")


def check_refusals(work):
    src = os.path.join(work, "hf_mlm")
    hf_folder(src)
    ck = os.path.join(work, "never")
    shutil.rmtree(ck, ignore_errors=True)
    refused(work, continue_args(work, ck, src, **{"model.hidden_size": 64}),
            ["model.hidden_size: 64 (the command line) contradicts the source's 32", src], "a contradicting key", 2)
    refused(work, continue_args(work, ck, src, **{"model.max_positions": 64}),
            ["model.max_positions: 64", "not shorten"], "a shorter table")
    refused(work, continue_args(work, ck, os.path.join(src, "config.json")), ["train.init_from", "is a file"],
            "a file as --init-from")
    cased = os.path.join(work, "cased_shards")
    if not os.path.exists(os.path.join(cased, "effective_config.ini")):
        mpirun(1, ["preprocess", "--config", os.path.join(SRC, "configs", "tiny.ini"),
                   "--input", os.path.join(DATA, "text", "wikitext-2", "wiki.test.raw"), "--tokenizer.vocab",
                   os.path.join(DATA, "vocab", "bert-base-cased-vocab.txt"), "--tokenizer.lower_case", "false",
                   "--output", cased, "--overwrite", "--quiet"])
    refused(work, continue_args(work, ck, src, **{"data.train_shards": cased, "data.validation_shards": cased}),
            ["data.train_shards", "vocabulary SHA-256", "preprocess with its vocabulary", "--tokenizer.vocab "],
            "shards of another vocabulary")
    binary = os.path.join(work, "hf_bin")
    shutil.rmtree(binary, ignore_errors=True)
    shutil.copytree(src, binary)
    import torch
    from safetensors.torch import load_file as load_torch
    torch.save(load_torch(os.path.join(binary, "model.safetensors")), os.path.join(binary, "pytorch_model.bin"))
    os.remove(os.path.join(binary, "model.safetensors"))
    p = mpirun(1, continue_args(work, ck, binary), check=False)
    err = error_lines(p)
    refused(work, continue_args(work, ck, binary), ["model.safetensors: missing", "pytorch_model.bin"], "a .bin folder")
    command = err[0][err[0].index("python -c"):]
    subprocess.run(["bash", "-c", command.replace("python -c", shlex_quote(sys.executable) + " -c", 1)], check=True)
    if not os.path.exists(os.path.join(binary, "model.safetensors")):
        fail("the conversion command of the .bin refusal wrote no model.safetensors")
    mpirun(1, continue_args(work, os.path.join(work, "converted"), binary, **{"train.max_steps": 1}))
    print("the .bin refusal's conversion command works: the converted folder trains")
    roberta = os.path.join(work, "hf_roberta")
    shutil.rmtree(roberta, ignore_errors=True)
    shutil.copytree(src, roberta)
    cfg = json.load(open(os.path.join(roberta, "config.json")))
    cfg["model_type"] = "roberta"
    json.dump(cfg, open(os.path.join(roberta, "config.json"), "w"))
    refused(work, continue_args(work, ck, roberta), ["config.json", "model_type 'roberta' is not BERT"],
            "another model_type")
    short = os.path.join(work, "hf_short_vocab")
    shutil.rmtree(short, ignore_errors=True)
    shutil.copytree(src, short)
    lines = open(VOCAB, encoding="utf-8").read().splitlines()[:-1]
    open(os.path.join(short, "vocab.txt"), "w", encoding="utf-8").write("\n".join(lines) + "\n")
    refused(work, continue_args(work, ck, short), ["vocab.txt", "30521 entries", "30522 rows"], "a short vocab.txt")
    print("refusals OK")


def shlex_quote(s):
    import shlex
    return shlex.quote(s)


def check_two_phase(work):
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    chain = [sys.executable, os.path.join(SRC, "launch", "two_phase.py"),
             "--phase1", os.path.join(SRC, "configs", "two-phase", "toy-phase1.ini"),
             "--phase2", os.path.join(SRC, "configs", "two-phase", "toy-phase2.ini"),
             "--corpus", os.path.join(DATA, "text", "wikitext-2", "wiki.test.raw"), "--work", work, "--np", "2",
             "--vocab", VOCAB]
    env = dict(ENV, TUPE_BIN=TUPE, OMPI_MCA_rmaps_base_oversubscribe="1")
    p = subprocess.run(chain, env=env, capture_output=True, text=True, timeout=900)
    if p.returncode != 0 or "both phases finished" not in p.stdout:
        fail(f"two_phase.py (exit {p.returncode}):\n{p.stdout[-3000:]}\n{p.stderr[-2000:]}")
    p1 = os.path.join(work, "phase1", "step_00000060")
    d2, w2, st2 = step_files(os.path.join(work, "phase2"), 20)
    origin = st2.get("origin", {})
    if (os.path.realpath(origin.get("path", "")) != os.path.realpath(p1) or origin.get("step") != 60
            or origin.get("weights_sha256") != sha256(os.path.join(p1, "model.safetensors"))
            or origin.get("max_positions") != 64):
        fail(f"phase 2's origin {origin}, want phase 1's step 60 ({p1})")
    if w2["encoder.positional.table.weight"].shape[0] != 129 or st2["config"]["model.max_positions"] != "128":
        fail(f"phase 2's table {w2['encoder.positional.table.weight'].shape}, max_positions "
             f"{st2['config']['model.max_positions']}; want 129 rows, 128")
    if st2["step"] != 20 or st2["scheduler_step"] != 20 or st2["config"]["optimizer.total_steps"] != "20":
        fail(f"phase 2 is not a fresh run of 20 steps: step {st2['step']}, scheduler {st2['scheduler_step']}")
    opt = load_file(os.path.join(d2, "optimizer.safetensors"))
    steps = {float(v.reshape(-1)[0]) for k, v in opt.items() if k.endswith(".step") or k.endswith("step")}
    if steps and steps != {20.0}:
        fail(f"phase 2's optimizer counts {sorted(steps)} steps, want 20 (fresh)")
    before = sha256(os.path.join(d2, "model.safetensors"))
    p = subprocess.run(chain, env=env, capture_output=True, text=True, timeout=900)
    if p.returncode != 0 or p.stdout.count("pre-training finished at step") != 2:
        fail(f"two_phase.py again (exit {p.returncode}):\n{p.stdout[-3000:]}")
    if sha256(os.path.join(d2, "model.safetensors")) != before:
        fail("running the finished chain again changed phase 2's last checkpoint")
    p = subprocess.run(chain + ["--launcher", "slurm", "--dry-run", "--sbatch=--nodes=2"], env=env,
                       capture_output=True, text=True)
    sb = [line for line in p.stdout.splitlines() if line.startswith("+ sbatch")]
    if p.returncode != 0 or len(sb) != 2 or "--dependency=afterok:1001" not in sb[1] or "--init-from" not in sb[1] \
            or "--nodes=2" not in sb[0]:
        fail(f"--launcher slurm --dry-run:\n{p.stdout}")
    print("two_phase OK")


def main():
    check, work = sys.argv[1], os.path.abspath(sys.argv[2])
    os.makedirs(work, exist_ok=True)
    {"hf": check_hf, "resume": check_resume, "refusals": check_refusals, "two_phase": check_two_phase}[check](work)


if __name__ == "__main__":
    main()
