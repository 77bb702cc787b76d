#!/usr/bin/env python3
"""Writes the seed inputs of the libFuzzer harnesses into fuzz/corpus/<harness>/.

Run from the repository root:  python3 fuzz/make_seeds.py
Sources: configs/*.ini, a few lines of ../shared/data/glue/*.tsv, the head of
../shared/data/vocab/bert-base-uncased-vocab.txt, and hand-built safetensors / JSON files
(no third-party modules needed). The manifest seeds list the sizes and SHA-256s of the fixed
checkpoint files of fuzz/fuzz_checkpoint_fixture.h (its trainer_state.json is read from there;
the safetensors bytes below must match that header).
"""
import hashlib
import json
import os
import re
import struct
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.path.join(os.path.dirname(ROOT), "shared", "data")
CORPUS = os.path.join(ROOT, "fuzz", "corpus")


def put(harness, name, data):
    folder = os.path.join(CORPUS, harness)
    os.makedirs(folder, exist_ok=True)
    if isinstance(data, str):
        data = data.encode("utf-8")
    with open(os.path.join(folder, name), "wb") as f:
        f.write(data)


def head_lines(path, n):
    with open(path, "rb") as f:
        return b"".join(f.readline() for _ in range(n))


def safetensors_bytes(header, data=b""):
    header = header.encode("utf-8")
    header += b" " * ((8 - len(header) % 8) % 8)
    return struct.pack("<Q", len(header)) + header + data


# --- INI: the shipped configs, one with a UTF-8 BOM and CRLF line ends.
for folder in ("configs", os.path.join("configs", "glue")):
    for name in sorted(os.listdir(os.path.join(ROOT, folder))):
        if name.endswith(".ini"):
            with open(os.path.join(ROOT, folder, name), "rb") as f:
                put("ini", folder.replace(os.sep, "_") + "_" + name, f.read())
put("ini", "bom_crlf.ini", b"\xef\xbb\xbf# comment\r\n[model]\r\nhidden_size = 64\r\n# other\r\n[train]\r\nlr=1e-4\r\n")

# --- TSV: "<split file>[ skip]\n" then the file's bytes (see fuzz/fuzz_tsv.cpp).
glue = os.path.join(SHARED, "glue")
for split, lines in (("SST-2/dev.tsv", 6), ("RTE/dev.tsv", 3), ("CoLA/dev.tsv", 4), ("STS-B/dev.tsv", 4),
                     ("MRPC/dev.tsv", 3), ("QNLI/dev.tsv", 3), ("WNLI/dev.tsv", 3), ("SST-2/test.tsv", 3),
                     ("CoLA/test.tsv", 3), ("diagnostic/diagnostic.tsv", 3)):
    put("tsv", split.replace("/", "_"), split.encode() + b"\n" + head_lines(os.path.join(glue, split), lines))
put("tsv", "SST-2_dev_skip.tsv", b"SST-2/dev.tsv skip\nsentence\tlabel\r\ngood .\t1\r\n\t0\r\nbad\t2\r\nok\t0")
put("tsv", "MNLI_dev_matched.tsv",
    b"MNLI/dev_matched.tsv\nindex\tpromptID\tpairID\tgenre\tsentence1_binary_parse\tsentence2_binary_parse\t"
    b"sentence1_parse\tsentence2_parse\tsentence1\tsentence2\tlabel1\tgold_label\n"
    b"0\t1\t1e\tfiction\t( a )\t( b )\t(ROOT a)\t(ROOT b)\tA man.\tA person.\tentailment\tentailment\n")

# --- Vocab: the head of BERT's uncased vocab (specials at ids 0, 100-103) plus some words.
vocab_path = os.path.join(SHARED, "vocab", "bert-base-uncased-vocab.txt")
put("vocab", "bert_head200.txt", head_lines(vocab_path, 200))
with open(vocab_path, "rb") as f:
    all_tokens = f.read().split(b"\n")
picked = all_tokens[:104] + [t for t in all_tokens if t in (b"hello", b"running", b"un", b"##aff", b"##able",
                                                               b"##ing", b",", b"!", b"w", b"##or", b"##ld")]
put("vocab", "bert_specials_words.txt", b"\n".join(picked) + b"\n")
put("vocab", "crlf_no_final_newline.txt", b"[PAD]\r\n[UNK]\r\n[CLS]\r\n[SEP]\r\n[MASK]\r\nh\xc3\xa9llo\r\n##s")

# --- safetensors: the fixture files and a file with every dtype and metadata.
MODEL = safetensors_bytes('{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}', struct.pack("<2f", 1.0, 2.0))
OPTIMIZER = safetensors_bytes('{"__metadata__":{"kind":"adamw"}}')
put("safetensors", "model.safetensors", MODEL)
put("safetensors", "optimizer.safetensors", OPTIMIZER)
entries, data = {}, b""
for name, dtype, shape, payload in (("a.f64", "F64", [1], struct.pack("<d", 0.5)),
                                    ("b.i64", "I64", [2], struct.pack("<2q", -1, 7)),
                                    ("c.f32", "F32", [1, 2], struct.pack("<2f", 3.0, -4.0)),
                                    ("d.i32", "I32", [1], struct.pack("<i", 9)),
                                    ("e.bf16", "BF16", [2], b"\x80\x3f\x00\x40"),
                                    ("f.f16", "F16", [1], b"\x00\x3c"),
                                    ("g.i16", "I16", [1], struct.pack("<h", -2)),
                                    ("h.bool", "BOOL", [3], b"\x01\x00\x01"),
                                    ("i.u8", "U8", [2], b"\xff\x00"),
                                    ("j.i8", "I8", [1], b"\x80"),
                                    ("k.empty", "F32", [0, 3], b"")):
    entries[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(payload)]}
    data += payload
entries["__metadata__"] = {"format": "pt", "note": "fuzz seed"}
put("safetensors", "all_dtypes.safetensors", safetensors_bytes(json.dumps(entries, separators=(",", ":")), data))

# --- trainer_state.json (the fixture's text) and a richer one.
# The fixture's trainer_state.json, read from the header the manifest harness compiles in.
with open(os.path.join(ROOT, "fuzz", "fuzz_checkpoint_fixture.h"), encoding="utf-8") as header:
    STATE = re.search(r'fixture_trainer_state\(\) \{\n  return R"\((.*?)\)";', header.read(), re.S).group(1)
put("trainer_state", "fixture.json", STATE)
rich = json.loads(STATE)
rich.update(step=1200, scheduler_step=1199, world_size=8, vocab_sha256=hashlib.sha256(b"v").hexdigest())
rich["loss_scaler"] = {"scale": 0.125, "growth_tracker": 17, "consecutive_skips": 2, "total_skips": 3}
rich["rng"] = {"cpu": "0123456789abcdefABCDEF", "cuda": ["00", "", "ff00"]}
rich["config"] = {"model.hidden_size": "768", "train.lr": "1e-4", "data.vocab": "a b"}
put("trainer_state", "rich.json", json.dumps(rich, indent=2) + "\n")

# --- manifest.json for the fixture folder step_00000001 (see fuzz/fuzz_manifest.cpp).
files = {"model.safetensors": MODEL, "optimizer.safetensors": OPTIMIZER, "trainer_state.json": STATE.encode()}
v2 = {"format": "tupe-checkpoint", "format_version": 2, "step": 1,
      "files": {n: {"bytes": len(b), "sha256": hashlib.sha256(b).hexdigest()} for n, b in files.items()}}
put("manifest", "v2.json", json.dumps(v2, indent=2) + "\n")
v1 = {"format": "tupe-checkpoint", "format_version": 1, "step": 1, "files": {n: len(b) for n, b in files.items()}}
put("manifest", "v1.json", json.dumps(v1, indent=2) + "\n")
v2_extra = json.loads(json.dumps(v2))
v2_extra["files"]["manifest.json"] = {"bytes": 0, "sha256": "0" * 64}
put("manifest", "v2_extra_file.json", json.dumps(v2_extra) + "\n")
print("seeds written under", CORPUS, file=sys.stderr)
