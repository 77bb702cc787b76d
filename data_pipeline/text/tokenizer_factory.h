// Building a tokenizer from its files. The options are what a shard records (kind,
// vocabulary path, lower-casing), so a loader can rebuild the same tokenizer.
#pragma once
#include <memory>
#include <string>

#include "common/config_fields.h"
#include "data_pipeline/tokenizer.h"

namespace tupe::data_pipeline {

/// Which tokenizer reads the vocabulary (tokenizer.kind).
enum class TokenizerKind {
  kWordPiece,      ///< BERT's WordPiece on a vocab.txt (wordpiece.h)
  kSentencePiece,  ///< a SentencePiece .model (sentencepiece_tokenizer.h)
};
inline constexpr Choice<TokenizerKind> kTokenizerKindWords[] = {{"wordpiece", TokenizerKind::kWordPiece},
                                                                {"sentencepiece", TokenizerKind::kSentencePiece}};
/// "wordpiece" | "sentencepiece" (also what Tokenizer::kind() and shard headers record).
std::string to_string(TokenizerKind k);
/// Parses "wordpiece" | "sentencepiece"; throws tupe::Error "<key>: expected wordpiece or sentencepiece, got '<text>'".
TokenizerKind parse_tokenizer_kind(const std::string& key, const std::string& text);

/// [tokenizer] section. Every field -- its meaning, unit, default and range -- is described
/// once, in the field table in tokenizer_factory.cpp (common/config_fields.h; docs/config.md).
struct TokenizerOptions {
  TokenizerOptions() { fields().reset(*this); }
  TokenizerKind kind;
  std::string vocab;
  bool lower_case;
  int64_t max_word_chars;
  /// The values given: ranges and words. Throws tupe::Error "tokenizer.<key>: <cause>" (what
  /// other subcommands check of a [tokenizer] section they do not read; cli/config_cli.h).
  void check_values() const;
  /// check_values(), and what loading needs: a vocabulary path. Throws tupe::Error
  /// "tokenizer.<key>: <cause>" (pure: does not open the vocabulary).
  void validate() const;
  static const FieldTable<TokenizerOptions>& fields();
};

/// The kind of tokenizer that reads options.vocab, from the file's content (vocab_file.h):
/// UTF-8 text is wordpiece, a SentencePiece model sentencepiece. With `kind_given` false the
/// file decides; with it true options.kind must agree. A file that is neither keeps
/// options.kind (its loader then names the fault). Throws tupe::Error, one line:
///   "<vocab>: a SentencePiece .vocab listing (a piece and its score a line), which no tokenizer
///    loads; pass the model written with it (<stem>.model)",
///   "<vocab>: a SentencePiece model, but tokenizer.kind = wordpiece (a vocab.txt); set
///    tokenizer.kind = sentencepiece, or leave it out (the file tells)" and its mirror for text,
///   "<vocab>: cannot open: <reason>".
TokenizerKind resolve_tokenizer_kind(const TokenizerOptions& options, bool kind_given);

/// Loads the tokenizer (validate() first, then resolve_tokenizer_kind(options, true)); throws
/// tupe::Error "<vocab path>: <cause>" when the file is missing, of the other kind or
/// malformed (e.g. a special token absent). wordpiece: lower_case also strips accents (BERT's
/// convention); sentencepiece: lower_case must match the model.
std::unique_ptr<Tokenizer> make_tokenizer(const TokenizerOptions& options);

}  // namespace tupe::data_pipeline
