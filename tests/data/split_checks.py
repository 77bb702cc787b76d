"""A document's split is a property of the document (data_pipeline/document_split.h).

Usage: split_checks.py WORKDIR
The documents of mixed-english's validation file (blank-line separated; lines kept as they are)
are written as plain text, as JSON lines and as Parquet (row groups of 200 rows, one null row, an
extra column), and preprocessed with validation_ratio 0.1 and packing = document at
piece_bytes 65536 and 1048576, by 1 and by 3 ranks (12 runs). Then:
  - the validation documents are those a Python re-implementation of the rule picks
    (uniform(rng_key(split, seed, FNV-1a 64 of the text, its bytes)) < 0.1, with SplitMix64 as in
    common/mix64.h): the word-piece multiset of every run's validation shards equals Hugging
    Face's BertTokenizer's word pieces of exactly those documents, and the train shards hold the
    others';
  - every run's validation sequences, and its train sequences, are the same multiset;
  - where the piece boundaries coincide (one piece: piece_bytes above the file size, one row
    group), packing = full_sentences gives the same sequences in the same order for the three
    formats;
  - every shard records split_rule = document_text.
Environment: TUPE_BIN, TUPE_SHARED_DATA.
"""
import collections
import glob
import json
import os
import shutil
import subprocess
import sys

import h5py
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

TUPE = os.environ["TUPE_BIN"]
DATA = os.environ["TUPE_SHARED_DATA"]
VOCAB = os.path.join(DATA, "vocab", "bert-base-uncased-vocab.txt")
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_btl_vader_single_copy_mechanism="none", OMP_NUM_THREADS="1")
RATIO, SEED = 0.1, 12345

M = (1 << 64) - 1
GAMMA = 0x9E3779B97F4A7C15
SPLIT_DOMAIN = 0x73706C6974  # "split"


def mix64(x):
    x ^= x >> 30
    x = (x * 0xBF58476D1CE4E5B9) & M
    x ^= x >> 27
    x = (x * 0x94D049BB133111EB) & M
    return x ^ (x >> 31)


def rng_key(domain, seed, a, b):
    k = mix64(domain ^ GAMMA)
    k = mix64(k ^ seed)
    k = mix64((k + 0x632BE59BD9B4E019 + a) & M)
    return mix64((k + 0x8CB92BA72F3D8DD7 + b) & M)


def fnv1a_64(data, h=0xCBF29CE484222325):
    for c in data:
        h = ((h ^ c) * 0x100000001B3) & M
    return h


def goes_to_validation(lines):
    text = b"".join(line.encode("utf-8") + b"\n" for line in lines)
    key = rng_key(SPLIT_DOMAIN, SEED, fnv1a_64(text), len(text))
    return (mix64((key + GAMMA) & M) >> 11) * 2.0 ** -53 < RATIO


def check(cond, what, detail=""):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        sys.exit("FAILED: " + what + ("\n" + detail[-3000:] if detail else ""))


def documents():
    """mixed-english validation's documents: runs of lines without a blank line (only spaces,
    tabs or \\r) between them; lines that tupe would read as blank (C0/C1 controls) dropped."""
    docs, cur = [], []
    for raw in open(os.path.join(DATA, "text", "mixed-english", "validation.txt"), encoding="utf-8"):
        line = raw.rstrip("\n").rstrip("\r")
        if line.strip(" \t\r") == "":
            if cur:
                docs.append(cur)
            cur = []
            continue
        if all(ord(ch) < 0x20 or 0x7F <= ord(ch) <= 0x9F or ch.isspace() for ch in line):
            continue
        cur.append(line)
    if cur:
        docs.append(cur)
    return docs


def write_inputs(work, docs):
    paths = {"text": os.path.join(work, "docs.txt"), "jsonl": os.path.join(work, "docs.jsonl"),
             "parquet": os.path.join(work, "docs.parquet"), "parquet1": os.path.join(work, "docs-one-group.parquet")}
    with open(paths["text"], "w", encoding="utf-8") as f:
        f.write("\n\n".join("\n".join(d) for d in docs) + "\n")
    with open(paths["jsonl"], "w", encoding="utf-8") as f:
        for i, d in enumerate(docs):
            f.write(json.dumps({"id": i, "text": "\n".join(d)}) + "\n")
    texts = ["\n".join(d) for d in docs]
    texts.insert(7, None)  # a null row, skipped
    table = pa.table({"text": texts, "source": ["mixed-english"] * len(texts)})
    pq.write_table(table, paths["parquet"], row_group_size=200)
    pq.write_table(table, paths["parquet1"], row_group_size=len(texts))
    return paths


def preprocess(ranks, inp, out, *extra):
    shutil.rmtree(out, ignore_errors=True)
    cmd = ["mpirun", "-np", str(ranks), "--oversubscribe", "--bind-to", "none", TUPE, "preprocess", "--input", inp,
           "--output", out, "--tokenizer.vocab", VOCAB, "--preprocess.max_seq_len", "64",
           "--preprocess.validation_ratio", str(RATIO), "--preprocess.seed", str(SEED), "--preprocess.num_shards", "2",
           "--quiet", *extra]
    p = subprocess.run(cmd, env=ENV, capture_output=True, text=True, timeout=900)
    check(p.returncode == 0, f"preprocess {os.path.basename(inp)} {' '.join(extra)} on {ranks} rank(s)",
          p.stdout + p.stderr)


def sequences(out, split):
    """The split's sequences, shard by shard in order, as tuples of token ids."""
    seqs = []
    for path in sorted(glob.glob(os.path.join(out, f"{split}-*.h5"))):
        with h5py.File(path, "r") as f:
            rule = f.attrs["split_rule"]
            rule = rule.decode() if isinstance(rule, bytes) else str(rule)
            if rule != "document_text":
                check(False, f"{path}: split_rule is {rule!r}, not 'document_text'")
            tokens, lengths = f["token_ids"][()], f["sequence_lengths"][()]
            starts = np.concatenate([[0], np.cumsum(lengths)])
            seqs += [tuple(int(t) for t in tokens[starts[i]:starts[i + 1]]) for i in range(len(lengths))]
    return seqs


def main():
    work = sys.argv[1]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    docs = documents()
    paths = write_inputs(work, docs)
    wanted = [goes_to_validation(d) for d in docs]
    print(f"{len(docs)} documents, {sum(wanted)} drawn for validation by the Python rule")

    from transformers import BertTokenizer
    tok = BertTokenizer(VOCAB, do_lower_case=True)
    special = {tok.cls_token_id, tok.sep_token_id, tok.pad_token_id}
    expect = {"validation": collections.Counter(), "train": collections.Counter()}
    for d, v in zip(docs, wanted):
        for line in d:
            expect["validation" if v else "train"].update(tok.convert_tokens_to_ids(tok.tokenize(line)))

    runs = {}
    for fmt in ("text", "jsonl", "parquet"):
        for piece in (65536, 1048576):
            for ranks in (1, 3):
                out = os.path.join(work, f"{fmt}-{piece}-np{ranks}")
                preprocess(ranks, paths[fmt], out, "--preprocess.packing", "document", "--preprocess.piece_bytes",
                           str(piece))
                runs[(fmt, piece, ranks)] = {s: sequences(out, s) for s in ("train", "validation")}
    first_key = next(iter(runs))
    for split in ("validation", "train"):
        got = collections.Counter(t for seq in runs[first_key][split] for t in seq if t not in special)
        check(got == expect[split], f"{split}: the word pieces of {first_key} are those of the documents the rule "
                                    f"picks ({sum(expect[split].values())} pieces)")
        ref = sorted(runs[first_key][split])
        for key, r in runs.items():
            check(sorted(r[split]) == ref, f"{split}: {key} holds the same {len(ref)} sequences as {first_key}")

    one = {}
    for fmt, path in (("text", paths["text"]), ("jsonl", paths["jsonl"]), ("parquet", paths["parquet1"])):
        out = os.path.join(work, f"{fmt}-one-piece")
        preprocess(1, path, out, "--preprocess.piece_bytes", str(1 << 26))
        one[fmt] = {s: sequences(out, s) for s in ("train", "validation")}
    for fmt in ("jsonl", "parquet"):
        for split in ("train", "validation"):
            check(one[fmt][split] == one["text"][split],
                  f"one piece, full_sentences: {fmt}'s {split} sequences equal the text file's, in order")


if __name__ == "__main__":
    main()
