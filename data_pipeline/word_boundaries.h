// Which token ids continue a word, for whole-word and span masking (masker.h).
//
// A word is a piece that starts one and the pieces after it that continue it:
//   WordPiece:     a piece continues a word when its vocabulary entry starts with "##"
//                  (BERT's continuation prefix; Devlin et al.'s whole-word masking groups the same way);
//   SentencePiece: a piece starts a word when its entry starts with "▁" (U+2581, the space
//                  marker); every other ordinary piece continues the word before it.
// Special tokens ([PAD] [UNK] [CLS] [SEP] [MASK]) belong to no word: they end the word before
// them, and a continuation right after one starts a word of its own (HF's
// DataCollatorForWholeWordMask would glue a "##" piece after [SEP] to the word before the
// separator; docs/pretraining.md "Masking strategies").
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data_pipeline/tokenizer.h"

namespace tupe::data_pipeline {

class WordBoundaries {
 public:
  /// `continues[id]` = 1 when id continues the word before it; `vocab_sha256` names the
  /// vocabulary (checked against the shards'). Throws tupe::Error for an empty table.
  WordBoundaries(std::vector<uint8_t> continues, std::string vocab_sha256);
  /// The table of a tokenizer's vocabulary (the rule above; special tokens are 0).
  static std::shared_ptr<const WordBoundaries> of(const Tokenizer& tokenizer);
  /// Whether `id` continues the word of the piece before it (false outside the table).
  bool continues(int32_t id) const {
    return static_cast<uint32_t>(id) < continues_.size() && continues_[static_cast<uint32_t>(id)] != 0;
  }
  int64_t vocab_size() const { return static_cast<int64_t>(continues_.size()); }
  const std::string& vocab_sha256() const { return vocab_sha256_; }
  /// Ids that continue a word (for logs and tests).
  int64_t continuation_count() const;

 private:
  std::vector<uint8_t> continues_;
  std::string vocab_sha256_;
};

}  // namespace tupe::data_pipeline
