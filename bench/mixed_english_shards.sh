#!/usr/bin/env bash
# Shards of mixed-english (the real text in $TUPE_SHARED_DATA/text/mixed-english) for the
# pre-training benchmarks: train.txt -> OUT/train (4 shards), validation.txt -> OUT/validation
# (preprocess.split = validation). BERT's uncased WordPiece vocabulary, sequences of 128
# tokens packed from full sentences across documents (blank-line separated). Skips a split
# that is already there. Usage: bench/mixed_english_shards.sh TUPE_BIN OUT
set -euo pipefail
tupe="$1"; out="$2"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
data="${TUPE_SHARED_DATA:-$here/../shared/data}"
text="$data/text/mixed-english"
common=(--tokenizer.vocab "$data/vocab/bert-base-uncased-vocab.txt" --tokenizer.lower_case true
        --preprocess.max_seq_len 128 --preprocess.documents blank_line --preprocess.packing full_sentences
        --preprocess.seed 1)
if [ ! -f "$out/train/effective_config.ini" ]; then
  "$tupe" preprocess "${common[@]}" --preprocess.validation_ratio 0 --preprocess.num_shards 4 \
    --input "$text/train.txt" --output "$out/train" --overwrite
fi
if [ ! -f "$out/validation/effective_config.ini" ]; then
  "$tupe" preprocess "${common[@]}" --preprocess.split validation \
    --input "$text/validation.txt" --output "$out/validation" --overwrite
fi
