// The vocabulary and WordPiece lower-casing of a checkpoint, as `tupe export` and
// `tupe predict` resolve them (docs/formats.md "Checkpoints"): the vocabulary is the one
// given (--vocab), else the one the checkpoint carries, else (older checkpoints) its
// recorded tokenizer.vocab when that file is readable; its SHA-256 must equal the
// checkpoint's. Lower-casing: what the checkpoint records (an option that contradicts it is
// refused); for older checkpoints without a record the option (--lower-case true|false),
// else what its training shards (data.train_shards) record.
#pragma once
#include <filesystem>
#include <string>

#include "checkpoint/model_checkpoint.h"

namespace tupe::exporting {

/// `option` when given (throws tupe::Error "--vocab <path>: no such file" when absent), else
/// the checkpoint's carried vocabulary, else its tokenizer.vocab when readable, else "" (no
/// vocabulary known).
std::filesystem::path pick_checkpoint_vocab(const std::filesystem::path& option, const checkpoint::ModelCheckpoint& ckpt);

/// Throws ONE-line tupe::Error "<vocab>: ..." when the vocabulary's SHA-256 differs from the
/// checkpoint's, a vocab.txt's line count is not vocab_size, or a SentencePiece model has
/// more pieces than vocab_size.
void check_checkpoint_vocab(const std::filesystem::path& vocab, const checkpoint::ModelCheckpoint& ckpt);

/// The --lower-case option of export and predict.
enum class LowerCase {
  kAuto,   ///< what the checkpoint records (see above)
  kTrue,   ///< lower-case (and strip accents, BERT uncased)
  kFalse,  ///< keep the case
};
/// "auto" | "true" | "false".
std::string to_string(LowerCase l);
/// Parses "auto" | "true" | "false"; throws tupe::Error "<option>: expected auto, true or false, got '<text>'".
LowerCase parse_lower_case(const std::string& option, const std::string& text);

/// WordPiece lower-casing (see above). Throws ONE-line tupe::Error "--lower-case X contradicts
/// the checkpoint's tokenizer.lower_case Y (...)", or "<checkpoint>: ... give --lower-case
/// true|false" when nothing records it and the option is kAuto.
bool resolve_lower_case(LowerCase option, const checkpoint::ModelCheckpoint& ckpt);

}  // namespace tupe::exporting
