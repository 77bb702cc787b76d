"""Our own vocabulary and saved configs, end to end on real text (tiny-shakespeare).

Each check runs the real `tupe` in subprocesses and inspects what it wrote (shards through
h5py, checkpoints through safetensors, INI files as text), so the expectations come from
outside the C++ code.

Usage: vocab_checks.py CHECK WORKDIR
  setup       `tupe vocab` trains WORKDIR/spm/shakes.model (1000 pieces; fixture of the others)
  kind        preprocess without tokenizer.kind reads it from the file: the .model gives the
              shards kind = sentencepiece gives (h5py: same ids), the BERT vocab.txt a
              WordPiece run; the .vocab listing, and a kind the file contradicts, are refused
              in one line naming what to pass or set
  vocab       `tupe vocab` reads what preprocess reads: .txt.gz, .jsonl.zst and a folder holding
              a .jsonl.gz give the model the plain .txt gives, byte for byte; a model path under
              a new folder works and under a file fails within seconds (before training); it
              prints one effective-config line (and no config dump) and writes
              effective_config.ini beside the model; its first line arrives while it still runs
  rerun       a saved effective_config.ini runs again as it is: preprocess with a relative
              vocabulary in a config of another folder, then --config <shards>/effective_config.ini
              from another working folder (equal shards but for the recorded command line), and
              that file moved to a third folder (byte-identical shards); pretrain's
              <checkpoint.dir>/effective_config.ini (2 steps) from another folder gives the
              same weights bit for bit
  vocab_size  a pre-training config without model.vocab_size takes the shards' size (1000):
              effective_config.ini, trainer_state.json and the embedding rows say so, a
              resume and `tupe export` read it from the checkpoint; --model.vocab_size 999 is
              refused in one line
  guide       the vocab -> preprocess -> pretrain example of docs/corpora-and-preprocessing.md
              ("A vocabulary of your own"), run as written in a scratch folder (build/cli/tupe,
              ../shared/data and configs/ mapped to this build, data and checkout; pretrain
              stopped at --train.max_steps 2)
Environment: TUPE_BIN, TUPE_SOURCE_DIR, TUPE_SHARED_DATA, TUPE_PYTHON (for make_format_inputs.py).
"""
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from script_checks import check, one_line_refusal  # noqa: E402
from script_checks import run as run_command  # noqa: E402

TUPE = os.environ["TUPE_BIN"]
SRC = os.environ["TUPE_SOURCE_DIR"]
DATA = os.environ.get("TUPE_SHARED_DATA", os.path.join(SRC, "..", "shared", "data"))
SHAKES = os.path.join(DATA, "text", "tiny-shakespeare.txt")
BERT_VOCAB = os.path.join(DATA, "vocab", "bert-base-uncased-vocab.txt")
TINY = os.path.join(SRC, "configs", "tiny.ini")
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMP_NUM_THREADS="1")
# A short pre-training on the CPU: no validation pass, no progress line, fp32.
QUICK = ["--train.max_steps", "2", "--checkpoint.every_steps", "2", "--optimizer.warmup_steps", "1",
         "--train.log_every", "1", "--train.eval_every", "0", "--train.progress", "false",
         "--precision.precision", "fp32", "--train.threads", "1"]


def run(args, cwd=None, ok=True):
    """`args` run with the test environment (script_checks.run)."""
    return run_command(*args, cwd=cwd, ok=ok, env=ENV, timeout=600)


def fresh(path):
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    return path


def read_ini(path):
    """{"section.key": value} of an INI file (what tupe writes: [section], key = value, # comments)."""
    out, section = {}, ""
    for line in open(path, encoding="utf-8"):
        line = line.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("["):
            section = line[1:line.index("]")]
        else:
            k, v = line.split("=", 1)
            out[section + "." + k.strip()] = v.strip()
    return out


def shard_contents(folder):
    """{file: (datasets, attributes)} of every .h5 in `folder`, through h5py."""
    import h5py
    import numpy as np
    out = {}
    for name in sorted(os.listdir(folder)):
        if not name.endswith(".h5"):
            continue
        with h5py.File(os.path.join(folder, name), "r") as f:
            data = {}
            f.visititems(lambda k, o: data.__setitem__(k, np.array(o)) if isinstance(o, h5py.Dataset) else None)
            attrs = {k: (v.tolist() if hasattr(v, "tolist") else v) for k, v in f.attrs.items()}
        out[name] = (data, attrs)
    return out


def same_shards(a, b, ignore=()):
    """Whether two shard folders hold the same files with equal datasets and attributes."""
    import numpy as np
    ca, cb = shard_contents(a), shard_contents(b)
    if not ca or ca.keys() != cb.keys():
        return False
    for name in ca:
        (da, aa), (db, ab) = ca[name], cb[name]
        if da.keys() != db.keys() or any(not np.array_equal(da[k], db[k]) for k in da):
            return False
        if {k: v for k, v in aa.items() if k not in ignore} != {k: v for k, v in ab.items() if k not in ignore}:
            return False
    return True


def model_path(work):
    return os.path.join(work, "..", "setup", "spm", "shakes.model")


def preprocess(out, *args, cwd=None, ok=True):
    return run([TUPE, "preprocess", "--input", SHAKES, "--output", out, "--quiet",
                "--preprocess.max_seq_len", "64", "--preprocess.documents", "blank_line", *args], cwd=cwd, ok=ok)


def check_setup(work):
    p = run([TUPE, "vocab", "--vocab.input", SHAKES, "--vocab.model", os.path.join(fresh(work), "spm", "shakes.model"),
             "--vocab.vocab_size", "1000"])
    check("special ids = [PAD] 0, [UNK] 1, [CLS] 2, [SEP] 3, [MASK] 4" in p.stdout, "the reserved ids")


def check_kind(work):
    fresh(work)
    model = model_path(work)
    preprocess(os.path.join(work, "inferred"), "--tokenizer.vocab", model)
    preprocess(os.path.join(work, "explicit"), "--tokenizer.vocab", model, "--tokenizer.kind", "sentencepiece")
    attrs = next(iter(shard_contents(os.path.join(work, "inferred")).values()))[1]
    check(attrs.get("tokenizer_kind") in ("sentencepiece", b"sentencepiece") and attrs.get("vocab_size") == 1000,
          f"the .model without tokenizer.kind: SentencePiece shards ({attrs.get('tokenizer_kind')}, "
          f"{attrs.get('vocab_size')} ids)")
    check(same_shards(os.path.join(work, "inferred"), os.path.join(work, "explicit"), ignore=("command_line", "run_id")),
          "the same ids as with tokenizer.kind = sentencepiece")
    check(read_ini(os.path.join(work, "inferred", "effective_config.ini"))["tokenizer.kind"] == "sentencepiece",
          "effective_config.ini records the kind used")
    wp = preprocess(os.path.join(work, "bert"), "--tokenizer.vocab", BERT_VOCAB)
    check(wp.returncode == 0 and read_ini(os.path.join(work, "bert", "effective_config.ini"))["tokenizer.kind"]
          == "wordpiece", "the BERT vocab.txt without tokenizer.kind: WordPiece")
    listing = model[:-len(".model")] + ".vocab"
    one_line_refusal(preprocess(os.path.join(work, "listing"), "--tokenizer.vocab", listing, ok=False),
                     listing, "a SentencePiece .vocab listing", "pass the model written with it (" + model + ")")
    one_line_refusal(preprocess(os.path.join(work, "wrong"), "--tokenizer.vocab", model, "--tokenizer.kind",
                                "wordpiece", ok=False),
                     model, "a SentencePiece model, but tokenizer.kind = wordpiece", "set tokenizer.kind = sentencepiece")
    one_line_refusal(preprocess(os.path.join(work, "wrong"), "--tokenizer.vocab", BERT_VOCAB, "--tokenizer.kind",
                                "sentencepiece", ok=False),
                     BERT_VOCAB, "UTF-8 text (a WordPiece vocab.txt)", "set tokenizer.kind = wordpiece")
    check(not os.path.exists(os.path.join(work, "listing")) and not os.path.exists(os.path.join(work, "wrong")),
          "a refused run leaves no output folder")


def vocab(model, *inputs, extra=()):
    args = [TUPE, "vocab", "--vocab.model", model, "--vocab.vocab_size", "1000", *extra]
    return run(args + ["--vocab.input", ",".join(inputs)])


def check_vocab(work):
    fresh(work)
    formats = os.path.join(work, "formats")
    run([os.environ.get("TUPE_PYTHON", sys.executable), os.path.join(SRC, "tests", "data", "make_format_inputs.py"),
         SHAKES, formats, "shakes", "blank_line"])
    folder = fresh(os.path.join(work, "folder", "nested"))
    shutil.copy(os.path.join(formats, "shakes.jsonl.gz"), folder)
    ref = os.path.join(work, "new", "deeper", "plain.model")  # a folder that does not exist yet
    p = vocab(ref, SHAKES)
    lines = p.stdout.splitlines()
    config_lines = [l for l in lines if l.startswith("# effective config: ")]
    saved = os.path.join(os.path.dirname(ref), "effective_config.ini")
    check(len(config_lines) == 1 and saved in config_lines[0] and "[vocab]" not in p.stdout,
          f"one effective-config line naming {saved}, no config dump: {config_lines}")
    kv = read_ini(saved)
    check(kv.get("vocab.input") == SHAKES and kv.get("vocab.model") == os.path.abspath(ref)
          and kv.get("vocab.vocab_size") == "1000", "effective_config.ini beside the model, paths absolute")
    reference = open(ref, "rb").read()
    for label, inputs in (("gzip text", [os.path.join(formats, "shakes.txt.gz")]),
                          ("zstd JSON lines", [os.path.join(formats, "shakes.jsonl.zst")]),
                          ("a folder of a gzip JSON-lines file", [os.path.join(work, "folder")])):
        out = os.path.join(work, label.replace(" ", "_") + ".model")
        vocab(out, *inputs)
        check(open(out, "rb").read() == reference, f"{label}: the plain text's model, byte for byte")
    # A file where the model's folder should be: refused before any training.
    blocker = os.path.join(work, "blocker")
    open(blocker, "w").write("x")
    t = time.time()
    p = run([TUPE, "vocab", "--vocab.input", SHAKES, "--vocab.model", os.path.join(blocker, "m.model")], ok=False)
    one_line_refusal(p, blocker, "cannot create the output folder")
    check(time.time() - t < 10, f"refused up front ({time.time() - t:.1f} s)")
    # Lines are flushed as written: the first arrives while the run goes on.
    proc = subprocess.Popen([TUPE, "vocab", "--vocab.input", SHAKES, "--vocab.model", os.path.join(work, "f.model"),
                             "--vocab.vocab_size", "1000"], stdout=subprocess.PIPE, text=True, env=ENV)
    first = proc.stdout.readline()
    running = proc.poll() is None
    rest = proc.stdout.read()
    check(proc.wait() == 0 and running and first.startswith("vocab: reading 1 input file"),
          f"the first line ({first.strip()!r}) arrived while tupe vocab still ran ({running}); then {len(rest)} bytes")


def check_rerun(work):
    fresh(work)
    shutil.copytree(os.path.dirname(model_path(work)), os.path.join(work, "spm"))
    conf = fresh(os.path.join(work, "conf"))
    with open(os.path.join(conf, "pp.ini"), "w") as f:  # relative to its own folder: ../spm
        f.write("[tokenizer]\nkind = sentencepiece\nvocab = ../spm/shakes.model\n[preprocess]\nmax_seq_len = 64\ndocuments = blank_line\n"
                "validation_ratio = 0.05\nnum_shards = 2\nnum_validation_shards = 1\n")
    a, b, c = (fresh(os.path.join(work, x)) for x in "abc")
    args = ["--input", SHAKES, "--output", "shards", "--quiet"]
    run([TUPE, "preprocess", "--config", "../conf/pp.ini", *args], cwd=a)
    saved = os.path.join(a, "shards", "effective_config.ini")
    run([TUPE, "preprocess", "--config", saved, *args], cwd=b)
    check(read_ini(saved)["tokenizer.vocab"] == os.path.join(work, "spm", "shakes.model"),
          "the saved tokenizer.vocab is absolute")
    check(same_shards(os.path.join(a, "shards"), os.path.join(b, "shards"), ignore=("command_line",)),
          "--config <shards>/effective_config.ini from another folder: the same shards (h5py: datasets and "
          "attributes but the command line)")
    os.makedirs(os.path.join(c, "conf"))
    shutil.copy(saved, os.path.join(c, "conf", "pp.ini"))  # moved where ../spm does not exist
    os.makedirs(os.path.join(c, "a"))
    run([TUPE, "preprocess", "--config", "../conf/pp.ini", *args], cwd=os.path.join(c, "a"))
    for name in sorted(os.listdir(os.path.join(a, "shards"))):
        same = open(os.path.join(a, "shards", name), "rb").read() == open(os.path.join(c, "a", "shards", name), "rb").read()
        check(same, f"moved config, same command line: {name} byte-identical")
    # Pre-training: a config in conf/ naming shards, vocabulary and checkpoints relatively.
    text = open(TINY).read()
    for key, value in (("vocab", "../spm/shakes.model"), ("train_shards", "../a/shards"),
                       ("validation_shards", "../a/shards"), ("dir", "../ck1")):
        text = "\n".join(f"{key} = {value}" if l.startswith(key + " = ") else l for l in text.splitlines()) + "\n"
    open(os.path.join(conf, "pt.ini"), "w").write(text)
    run([TUPE, "pretrain", "--config", "../conf/pt.ini", *QUICK], cwd=a)
    ck1 = os.path.join(work, "ck1")
    run([TUPE, "pretrain", "--config", os.path.join(ck1, "effective_config.ini"), "--checkpoint.dir", "ck2"], cwd=b)
    from safetensors.numpy import load_file
    import numpy as np
    w1 = load_file(os.path.join(ck1, "step_00000002", "model.safetensors"))
    w2 = load_file(os.path.join(b, "ck2", "step_00000002", "model.safetensors"))
    check(w1.keys() == w2.keys() and all(np.array_equal(w1[k], w2[k]) for k in w1),
          f"pretrain --config <checkpoint.dir>/effective_config.ini from another folder: the same {len(w1)} "
          "tensors after 2 steps, bit for bit")
    k1, k2 = read_ini(os.path.join(ck1, "effective_config.ini")), read_ini(os.path.join(b, "ck2", "effective_config.ini"))
    check({k: v for k, v in k1.items() if k != "checkpoint.dir"} == {k: v for k, v in k2.items() if k != "checkpoint.dir"}
          and k2["checkpoint.dir"] == os.path.join(b, "ck2"), "its own effective_config.ini says the same but the folder")


def check_vocab_size(work):
    fresh(work)
    model = os.path.abspath(model_path(work))
    shards = os.path.join(work, "shards")
    preprocess(shards, "--tokenizer.vocab", model, "--tokenizer.kind", "sentencepiece")
    cfg = os.path.join(work, "no_vocab_size.ini")
    with open(cfg, "w") as f:  # tiny.ini without any model.vocab_size
        f.write("".join(l for l in open(TINY) if not l.startswith("vocab_size")).replace(
            "vocab = ../../shared/data/vocab/bert-base-uncased-vocab.txt", "vocab = " + model))
    ck = os.path.join(work, "ck")
    base = [TUPE, "pretrain", "--config", cfg, "--data.train_shards", shards, "--data.validation_shards", shards,
            "--checkpoint.dir", ck]
    run(base + QUICK)
    from safetensors.numpy import load_file
    check(read_ini(os.path.join(ck, "effective_config.ini"))["model.vocab_size"] == "1000",
          "effective_config.ini: model.vocab_size = 1000, the shards'")
    state = json.load(open(os.path.join(ck, "step_00000002", "trainer_state.json")))
    check(state["config"]["model.vocab_size"] == "1000", "trainer_state.json records 1000")
    weights = load_file(os.path.join(ck, "step_00000002", "model.safetensors"))
    rows = [v.shape[0] for k, v in weights.items() if k.endswith("word.weight")]
    check(rows == [1000], f"the word embedding has 1000 rows: {rows}")
    p = run(base + QUICK[4:] + ["--train.max_steps", "3", "--checkpoint.every_steps", "3"])
    check("resumed from" in p.stdout and "at step 2" in p.stdout and os.path.isdir(os.path.join(ck, "step_00000003")),
          "a resume without model.vocab_size continues from step 2 to step 3")
    hf = os.path.join(work, "hf")
    run([TUPE, "export", "--checkpoint", ck, "--output", hf])
    check(json.load(open(os.path.join(hf, "config.json")))["vocab_size"] == 1000, "export: config.json vocab_size 1000")
    p = run(base[:-1] + [os.path.join(work, "ck999"), "--model.vocab_size", "999", *QUICK], ok=False)
    one_line_refusal(p, "model.vocab_size: 999 but the shards", "hold a vocabulary of 1000")


def guide_commands():
    """The bash block under "### A vocabulary of your own" of docs/corpora-and-preprocessing.md."""
    text = open(os.path.join(SRC, "docs", "corpora-and-preprocessing.md"), encoding="utf-8").read()
    section = text[text.index("### A vocabulary of your own"):]
    block = section[section.index("```bash\n") + len("```bash\n"):]
    return [l for l in block[:block.index("```")].splitlines() if l.strip() and not l.startswith("#")]


def check_guide(work):
    fresh(work)
    commands = guide_commands()
    subcommands = [shlex.split(c)[1] for c in commands]
    check(subcommands == ["vocab", "preprocess", "pretrain"], f"the example runs vocab, preprocess, pretrain: {subcommands}")
    for c in commands:
        words = shlex.split(c)
        assert words[0] == "build/cli/tupe", words
        words[0] = TUPE
        words = [w.replace("../shared/data", DATA) if w.startswith("../shared/data") else
                 os.path.join(SRC, w) if w.startswith("configs/") else w for w in words]
        if words[1] == "pretrain":
            words += ["--train.max_steps", "2", "--train.progress", "false"]
        run(words, cwd=work)
    ckpts = [d for d in os.listdir(os.path.join(work, "runs", "spm", "checkpoints")) if d.startswith("step_")]
    check(ckpts == ["step_00000002"], f"the example pre-trained to a checkpoint: {ckpts}")
    state = json.load(open(os.path.join(work, "runs", "spm", "checkpoints", "step_00000002", "trainer_state.json")))
    check(state["config"]["model.vocab_size"] == "2000" and state["config"]["tokenizer.kind"] == "sentencepiece",
          "on the SentencePiece vocabulary of the example (2000 pieces)")


CHECKS = {"setup": check_setup, "kind": check_kind, "vocab": check_vocab, "rerun": check_rerun,
          "vocab_size": check_vocab_size, "guide": check_guide}

if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in CHECKS:
        sys.exit(__doc__)
    CHECKS[sys.argv[1]](os.path.realpath(sys.argv[2]))  # realpath: tupe's absolute paths resolve links
    print(sys.argv[1], "OK")
