// BERT's basic tokenizer: normalisation (HF BertNormalizer: clean_text, CJK isolation,
// optional accent stripping and lower-casing) and the split into words (HF
// BertPreTokenizer: drop whitespace, isolate punctuation), done in one pass over UTF-8.
//
// Equivalence with HF (tokenizers/src/normalizers/bert.rs, pre_tokenizers/bert.rs): HF
// normalises the whole string then splits it; here the same per-character decisions are
// taken while scanning (character classes: bert_chars.h). ASCII bytes take a table-driven
// fast path; non-ASCII characters between two ASCII characters form a "run" that is
// normalised as a whole (NFD reorders combining marks across characters, never across a
// starter such as an ASCII character, a space or an isolated CJK character).
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

namespace tupe::data_pipeline {

/// Receives the words of a text, in order.
class WordSink {
 public:
  virtual ~WordSink() = default;
  /// `word`: normalised UTF-8, non-empty, valid only during the call; `num_chars`: its
  /// number of code points.
  virtual void word(std::string_view word, size_t num_chars) = 0;
};

struct BertBasicOptions {
  bool lower_case = true;     ///< full lower-case mapping of every character
  bool strip_accents = true;  ///< NFD, then drop non-spacing marks (Mn)
};

/// Splits `text` (UTF-8) into normalised words, calling sink.word() for each.
/// Throws InvalidUtf8 (data_pipeline/text/utf8.h) naming the byte offset within `text`.
/// Thread-safe (all state is local to the call).
void bert_basic_split(std::string_view text, const BertBasicOptions& options, WordSink& sink);

}  // namespace tupe::data_pipeline
