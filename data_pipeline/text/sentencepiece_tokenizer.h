// A Tokenizer over a SentencePiece .model (unigram or BPE), e.g. one trained by
// train_sentencepiece() (data_pipeline/sentencepiece_train.h). Encoding is SentencePiece's own
// (normalisation rule stored in the model, "▁" marks a word start); the five special
// tokens must be pieces of the model.
#pragma once
#include <memory>
#include <string>

#include "data_pipeline/tokenizer.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace tupe::data_pipeline {

class SentencePieceTokenizer final : public Tokenizer {
 public:
  /// Loads `model_path`. `lower_case` must match the model's normalisation (a model trained
  /// with lower_case folds case; it is probed with "ABC" vs "abc"). Throws tupe::Error
  /// "<model_path>: <cause>": missing/unreadable/not a model, a special token
  /// ([PAD] [UNK] [CLS] [SEP] [MASK]) missing, or a lower-case mismatch.
  SentencePieceTokenizer(const std::string& model_path, bool lower_case);
  ~SentencePieceTokenizer() override;

  /// Throws InvalidUtf8 (utf8.h) on invalid input (SentencePiece itself would silently
  /// replace it) and tupe::Error if SentencePiece fails.
  std::vector<int32_t> encode(std::string_view text) const override;
  /// SentencePiece's detokenisation ("▁" back to spaces; control pieces dropped).
  std::string decode(const std::vector<int32_t>& ids) const override;
  int64_t vocab_size() const override { return vocab_size_; }
  std::string piece(int32_t id) const override { return id_to_piece(id); }
  SpecialTokens special_tokens() const override { return special_; }
  std::string kind() const override { return "sentencepiece"; }
  bool lower_case() const override { return lower_case_; }
  std::string vocab_sha256() const override { return sha256_; }

  /// The piece string of `id` (throws tupe::Error outside [0, vocab_size)).
  std::string id_to_piece(int32_t id) const;

 private:
  std::string path_;
  std::unique_ptr<sentencepiece::SentencePieceProcessor> processor_;
  int64_t vocab_size_ = 0;
  SpecialTokens special_;
  bool lower_case_ = false;
  std::string sha256_;
};

}  // namespace tupe::data_pipeline
