// Building a tokenizer from its files. The options are what a shard records (kind,
// vocabulary path, lower-casing), so a loader can rebuild the same tokenizer.
#pragma once
#include <memory>
#include <string>

#include "common/config_fields.h"
#include "data_pipeline/tokenizer.h"

namespace tupe::data {

struct TokenizerOptions {
  std::string kind = "wordpiece";  ///< wordpiece (BERT vocab.txt) | sentencepiece (.model file)
  std::string vocab;               ///< path of vocab.txt or the SentencePiece .model
  bool lower_case = true;          ///< lower-case (and strip accents, as BERT's basic tokenizer)
  int64_t max_word_chars = 100;    ///< WordPiece: longer words become [UNK] (characters)
  /// Throws tupe::Error "tokenizer.<key>: <cause>" (pure: does not open the vocabulary).
  void validate() const;
  static const FieldTable<TokenizerOptions>& fields();
};

/// Loads the tokenizer (validate() first); throws tupe::Error "<vocab path>: <cause>" when the
/// file is missing or malformed (e.g. a special token absent). wordpiece: lower_case also
/// strips accents (BERT's convention); sentencepiece: lower_case must match the model.
std::unique_ptr<Tokenizer> make_tokenizer(const TokenizerOptions& options);

}  // namespace tupe::data
