#!/usr/bin/env python3
"""Reference ids from HuggingFace for the WordPiece parity tests (tests/text/test_wordpiece_parity.cpp).

Runs HuggingFace `BertTokenizerFast` (the Rust `tokenizers` WordPiece pipeline: BertNormalizer,
BertPreTokenizer, WordPiece) over the real texts in $TUPE_SHARED_DATA/text and over a few
targeted strings, and dumps what the C++ test compares against. Any missing library or file is
an error (exit status != 0): the parity tests must fail, never skip, without their reference.

Writes into --out:
  <text>.<vocab>.ids  one line per input line (the text split on "\n", each line encoded on
                      its own, no special tokens added): the ids separated by spaces
  cases.<vocab>.tsv   targeted strings: <hex of the UTF-8 input> TAB <ids separated by spaces>
  char_classes.tsv    per code point what HF's BertNormalizer / BertPreTokenizer do with it:
                      "<first> <last> <flags>" ranges (hex code points, flags bit 1 removed by
                      clean_text, 2 whitespace, 4 punctuation split, 8 CJK isolated), then
                      "map <cp> <cp cp ...>" lines: the NFD + accent strip + lower-case result
                      of every code point whose result is not the code point itself
  DONE                written last; its presence means every file above is complete
"""
import argparse
import os
import sys

# One thread: the machine is shared, and the result must not depend on it.
os.environ.setdefault("RAYON_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from tokenizers import normalizers, pre_tokenizers  # noqa: E402
from transformers import BertTokenizerFast  # noqa: E402
from transformers.models.bert.tokenization_bert import load_vocab  # noqa: E402

TEXTS = ["wikitext-2/wiki.test.raw", "tiny-shakespeare.txt", "bert-sample-text.txt"]
# (vocab file, do_lower_case): the uncased vocab is used with lower-casing (and accent
# stripping, which BERT ties to it), the cased one without.
VOCABS = [("bert-base-uncased-vocab.txt", True), ("bert-base-cased-vocab.txt", False)]

# Targeted cases: accents, CJK, control characters, long words, punctuation, special tokens.
CASES = [
    "Café naïve résumé façade Ångström Øresund crème brûlée",
    "ÀÉÎÕÜ àéîõü ÇçÑñ Straße İstanbul ǅungla ΣΑΣ Σ ΟΔΥΣΣΕΥΣ",
    "e\u0301 a\u0323\u0301 a\u0301\u0323 o\u0308\u0304 ﬁ ﬃ Å Ω K",  # combining marks, ligatures, singletons
    "日本語のテキスト 中文字符测试 한국어 텍스트 野口里佳Noguchi",
    "CJK ext: \U00020000\U0002A700 compat: \uF900\uFA0E \u3400x\u4DBFy",
    "ctrl:\x00a\x01b\x07c\x0bd\x0ce\x1bf\x7fg\x85h\u200bi\u200dj\ufeffk\ufffdl\u00adm",
    "tabs\tand\nnewlines\r\nand\u00a0nbsp\u2003em\u3000ideo\u2028ls\u2029ps",
    "a" * 99 + " " + "b" * 100 + " " + "c" * 101 + " " + "d" * 150,
    "Supercalifragilisticexpialidocious" * 3 + " " + "é" * 101 + " " + "é" * 100,
    "Hello, world! (test) [x] {y} <z> \"q\" 'r' `s` ~t ^u |v \\w /x @y #z $1 %2 &3 *4 +5 =6 _7 -8",
    "dashes – — ‐ quotes “ ” ‘ ’ « » „ ‚ ellipsis … bullets • · ¡¿ § ¶ † ‡ ※ ‰ ′ ″",
    "math ± × ÷ ≤ ≥ ≠ ∞ ∑ √ currency € £ ¥ ¢ ₹ symbols © ® ™ ° emoji 😀🎉 ☃",
    "[CLS] hello [SEP] world [MASK] x[MASK]y [UNK] [PAD] [mask] [ MASK ] [[MASK]]",
    "numbers 3.14159 1,000,000 2nd 10th 1/2 ½ ² ³ ① Ⅳ",
    "Ελληνικά Русский текст עברית العربية हिन्दी ไทย",
    "  leading and trailing spaces   ",
    "",
    "\u037e \u0387 \u1fef \u2000 \u2001 \u166d \U000111c9 \u0890 \U00013430 \U0001e95e \u2e43",
    "UPPER lower MiXeD ÉCOLE ÆSIR ŒUVRE ẞ ǈ ǋ ǲ",
]


def make_tokenizer(shared, vocab_name, lower_case):
    vocab = load_vocab(os.path.join(shared, "vocab", vocab_name))
    tok = BertTokenizerFast(vocab=vocab, do_lower_case=lower_case)
    # transformers 5 silently falls back to a 5-token vocabulary when `vocab` is not passed:
    # make sure the real one is in use.
    assert tok.backend_tokenizer.get_vocab_size() == len(vocab), "vocabulary not loaded"
    return tok.backend_tokenizer


def write_ids(path, encodings):
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="ascii") as f:
        for enc in encodings:
            f.write(" ".join(map(str, enc.ids)))
            f.write("\n")
    os.replace(tmp, path)


def dump_char_classes(path):
    clean = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=False, strip_accents=False,
                                       lowercase=False)
    cjk = normalizers.BertNormalizer(clean_text=False, handle_chinese_chars=True, strip_accents=False,
                                     lowercase=False)
    strip_lower = normalizers.BertNormalizer(clean_text=False, handle_chinese_chars=False, strip_accents=True,
                                             lowercase=True)
    pretok = pre_tokenizers.BertPreTokenizer()
    ranges, maps = [], []
    for cp in range(0x110000):
        if 0xD800 <= cp <= 0xDFFF:
            continue  # surrogates are not characters; UTF-8 cannot carry them
        c = chr(cp)
        flags = 0
        cleaned = clean.normalize_str("a" + c + "b")
        if cleaned == "ab":
            flags |= 1
        elif cleaned == "a b":
            flags |= 2
        elif len(pretok.pre_tokenize_str("a" + c + "b")) == 3:
            flags |= 4
        if cjk.normalize_str(c) == " " + c + " ":
            flags |= 8
        if ranges and ranges[-1][2] == flags and ranges[-1][1] == cp - 1:
            ranges[-1][1] = cp
        else:
            ranges.append([cp, cp, flags])
        out = strip_lower.normalize_str(c)
        if out != c:
            maps.append((cp, out))
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="ascii") as f:
        for first, last, flags in ranges:
            f.write(f"{first:x} {last:x} {flags}\n")
        for cp, out in maps:
            f.write(f"map {cp:x} {' '.join(f'{ord(o):x}' for o in out)}\n")
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="output folder")
    ap.add_argument("--shared", default=os.environ.get("TUPE_SHARED_DATA"), help="shared data folder")
    args = ap.parse_args()
    if not args.shared:
        sys.exit("hf_reference_ids.py: TUPE_SHARED_DATA is not set and --shared not given")
    os.makedirs(args.out, exist_ok=True)
    done = os.path.join(args.out, "DONE")
    if os.path.exists(done):
        os.remove(done)

    for vocab_name, lower_case in VOCABS:
        tok = make_tokenizer(args.shared, vocab_name, lower_case)
        stem = vocab_name.replace("-vocab.txt", "")
        for text in TEXTS:
            with open(os.path.join(args.shared, "text", text), "rb") as f:
                lines = f.read().decode("utf-8").split("\n")
            encodings = tok.encode_batch(lines, add_special_tokens=False)
            write_ids(os.path.join(args.out, f"{os.path.basename(text)}.{stem}.ids"), encodings)
        encodings = tok.encode_batch(CASES, add_special_tokens=False)
        tmp = os.path.join(args.out, f"cases.{stem}.tsv.tmp")
        with open(tmp, "w", encoding="ascii") as f:
            for case, enc in zip(CASES, encodings):
                f.write(case.encode("utf-8").hex() + "\t" + " ".join(map(str, enc.ids)) + "\n")
        os.replace(tmp, tmp[:-4])

    dump_char_classes(os.path.join(args.out, "char_classes.tsv"))
    with open(done, "w") as f:
        f.write("ok\n")


if __name__ == "__main__":
    main()
