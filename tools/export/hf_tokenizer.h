// The tokenizer files of an exported Hugging Face folder, which
// `transformers.AutoTokenizer.from_pretrained(folder)` loads (no remote code):
//   WordPiece (a BERT vocab.txt): vocab.txt + tokenizer_config.json naming BertTokenizer
//     (transformers' tokenizers-backed BERT tokenizer) with do_lower_case (and accent
//     stripping, which BERT ties to it, as tupe's WordPiece does) and the five special tokens.
//   SentencePiece (a .model of `tupe vocab`, unigram or BPE): tokenizer.json for the
//     `tokenizers` library, built here from the .model's protobuf (no sentencepiece or
//     protobuf Python package needed to load it) + tokenizer_config.json naming
//     PreTrainedTokenizerFast, and the .model itself as spm.model:
//       normalizer     the model's own precompiled normalisation map (nmt_nfkc / _cf), then,
//                      as SentencePiece's remove_extra_whitespaces, strip and collapse spaces
//       pre-tokenizer  Metaspace: " " -> "▁", a "▁" prepended (add_dummy_prefix), split on it
//       model          Unigram with the pieces' scores, or BPE with merges derived from the
//                      pieces (a piece = left + right, both pieces; ranked by the piece's score)
//       post-processor [CLS] A [SEP] and [CLS] A [SEP] B [SEP] (type ids 0 / 1), as tupe encodes
//   Both: model_max_length = model.max_positions.
// One difference from tupe's own tokenizers: a special token written literally in the text
// ("[MASK]") is that token in transformers (how fill-mask inputs are written) and ordinary
// text in tupe.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "data_pipeline/text/tokenizer_factory.h"

namespace tupe::exporting {

/// kSentencePiece for a .model file, else kWordPiece (a vocab.txt).
data_pipeline::TokenizerKind tokenizer_kind_of(const std::filesystem::path& vocab);

/// What a SentencePiece .model holds that tokenizer.json needs (parsed from its protobuf).
struct SentencePieceModel {
  struct Piece {
    std::string text;   ///< e.g. "▁the"
    float score = 0;    ///< log probability (unigram) or -merge order (BPE)
    int type = 1;       ///< 1 normal, 2 unknown, 3 control, 4 user defined, 5 unused, 6 byte
  };
  std::vector<Piece> pieces;            ///< id order
  int model_type = 1;                   ///< 1 unigram, 2 BPE, 3 word, 4 char
  int64_t unk_id = 0;
  bool byte_fallback = false;
  std::string precompiled_charsmap;     ///< bytes of the normalisation map ("" = none)
  bool add_dummy_prefix = true;
  bool remove_extra_whitespaces = true;
  bool escape_whitespaces = true;
};

/// Parses a .model file. Throws ONE-line tupe::Error "<path>: ..." when it cannot be read or
/// is not a SentencePiece model protobuf.
SentencePieceModel read_sentencepiece_model(const std::filesystem::path& path);

/// tokenizer.json of `model`. `special` maps "[PAD]" "[UNK]" "[CLS]" "[SEP]" "[MASK]" to ids.
/// Throws tupe::Error "<where>: ..." for a model type other than unigram or BPE, or a
/// special token missing from the pieces.
nlohmann::json sentencepiece_tokenizer_json(const SentencePieceModel& model, const std::string& where);

/// Writes the tokenizer files for `vocab` into `dir` (which exists) and returns their names.
/// `lower_case` matters only for WordPiece (SentencePiece's case folding is in its map).
/// Without `token_type_ids` (a model with no segment embedding) tokenizer_config.json sets
/// model_input_names to input_ids and attention_mask, so the tokenizer returns no segment ids.
/// Throws ONE-line tupe::Error naming the vocabulary and the cause.
std::vector<std::string> write_hf_tokenizer(const std::filesystem::path& dir, const std::filesystem::path& vocab,
                                            bool lower_case, int64_t model_max_length, bool token_type_ids = true);

}  // namespace tupe::exporting
