#include "data_pipeline/text/tokenizer_factory.h"

#include "common/error.h"
#include "data_pipeline/text/sentencepiece_tokenizer.h"
#include "data_pipeline/text/vocab_file.h"
#include "data_pipeline/text/wordpiece.h"

namespace tupe::data_pipeline {

std::string to_string(TokenizerKind k) { return choice_word(k, kTokenizerKindWords); }

TokenizerKind parse_tokenizer_kind(const std::string& key, const std::string& text) {
  return parse_choice(key, text, kTokenizerKindWords);
}

void TokenizerOptions::check_values() const { fields().check(*this); }

void TokenizerOptions::validate() const {
  TUPE_CHECK(!vocab.empty(), "tokenizer.vocab: no vocabulary path given");
  check_values();
}

const FieldTable<TokenizerOptions>& TokenizerOptions::fields() {
  using S = TokenizerOptions;
  static const FieldTable<S> table = [] {
    FieldTable<S> t("tokenizer");
    t.choice("kind", &S::kind, kTokenizerKindWords, TokenizerKind::kWordPiece,
             "BERT's WordPiece on a vocab.txt, or a SentencePiece .model; preprocess reads it from the file when "
             "not set (text: wordpiece; a protobuf: sentencepiece)")
        .path("vocab", &S::vocab, "", "path of the vocab.txt or SentencePiece .model (required)")
        .boolean("lower_case", &S::lower_case, true,
                 "lower-case (wordpiece: and strip accents, as BERT's basic tokenizer; sentencepiece: must match "
                 "the model)")
        .integer("max_word_chars", &S::max_word_chars, 100, "characters", "wordpiece: longer words become [UNK]")
        .positive();
    return t;
  }();
  return table;
}

TokenizerKind resolve_tokenizer_kind(const TokenizerOptions& options, bool kind_given) {
  const std::string& path = options.vocab;
  const VocabFileContent content = sniff_vocab_file(path);
  if (content == VocabFileContent::kSentencePieceListing) {
    const std::string model = model_beside_listing(path);
    TUPE_FAIL(path << ": a SentencePiece .vocab listing (a piece and its score a line), which no tokenizer loads; "
                   << (model.empty() ? std::string("pass the .model file written with it") : "pass the model written with it (" + model + ")"));
  }
  if (content == VocabFileContent::kOther) return options.kind;
  const TokenizerKind found =
      content == VocabFileContent::kSentencePieceModel ? TokenizerKind::kSentencePiece : TokenizerKind::kWordPiece;
  if (!kind_given || found == options.kind) return found;
  TUPE_FAIL(path << (found == TokenizerKind::kSentencePiece ? ": a SentencePiece model, but tokenizer.kind = wordpiece (a vocab.txt)"
                                                            : ": UTF-8 text (a WordPiece vocab.txt), but tokenizer.kind = sentencepiece (a .model)")
                 << "; set tokenizer.kind = " << to_string(found) << ", or leave it out (the file tells)");
}

std::unique_ptr<Tokenizer> make_tokenizer(const TokenizerOptions& options) {
  options.validate();
  resolve_tokenizer_kind(options, true);
  if (options.kind == TokenizerKind::kSentencePiece)
    return std::make_unique<SentencePieceTokenizer>(options.vocab, options.lower_case);
  WordPieceOptions wp;
  wp.vocab_path = options.vocab;
  wp.lower_case = options.lower_case;
  wp.strip_accents = options.lower_case;
  wp.max_word_chars = options.max_word_chars;
  return std::make_unique<WordPieceTokenizer>(wp);
}

}  // namespace tupe::data_pipeline
