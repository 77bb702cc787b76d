"""Hugging Face's word grouping of real text, for tupe's whole-word masking test.

Usage: hf_word_groups.py VOCAB TEXT LINES OUT

Tokenises the first LINES non-empty lines of TEXT with BertTokenizerFast (VOCAB, lower-cased)
and writes one JSON object per line to OUT:
  ids            the token ids, no special tokens (tupe's WordPiece gives the same ids)
  word_ids       the tokenizers library's word index of each token (its pre-tokenizer's words:
                 BERT splits on white space and punctuation, so a word is a piece and its "##" pieces)
  collator_words the word index DataCollatorForLanguageModeling(whole_word_mask=True) gives each
                 token from the offsets (a word is a run of tokens without a gap in the text)
"""
import json
import sys

import numpy as np
from transformers import BertTokenizerFast, DataCollatorForLanguageModeling

vocab, text, lines, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
entries = {}
for i, line in enumerate(open(vocab, encoding="utf-8")):
    entries.setdefault(line.rstrip("\n").rstrip("\r"), i)
tok = BertTokenizerFast(vocab=entries, do_lower_case=True)
# transformers 5 falls back to a 5-token vocabulary without complaint when `vocab` is not taken.
assert tok.backend_tokenizer.get_vocab_size() == len(entries), "vocabulary not loaded"
rows = [line.strip() for line in open(text, encoding="utf-8")]
rows = [r for r in rows if r][:lines]
with open(out, "w") as f:
    for row in rows:
        enc = tok(row, add_special_tokens=False, return_offsets_mapping=True)
        ids = enc["input_ids"]
        if not ids:
            continue
        offsets = np.array([enc["offset_mapping"]])
        special = np.zeros((1, len(ids)), dtype=int)
        collator_words, _ = DataCollatorForLanguageModeling._calc_word_ids_and_prob_mask(offsets, special)
        f.write(json.dumps({"ids": ids, "word_ids": enc.word_ids(),
                            "collator_words": collator_words[0].tolist()}) + "\n")
