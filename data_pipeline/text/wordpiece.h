// BERT WordPiece from a vocab.txt, id-for-id identical to HuggingFace BertTokenizerFast
// (tokenizers' BertNormalizer + BertPreTokenizer + WordPiece, no special tokens added).
//
// Pipeline of encode(text):
//   1. literal special tokens ("[PAD]" "[UNK]" "[CLS]" "[SEP]" "[MASK]") in the raw text
//      become their ids, as HF's added-token matching does (case-sensitive, before any
//      normalisation); the text between them goes through 2-3;
//   2. BERT's basic tokenizer (bert_pretokenizer.h): clean_text, CJK isolation, optional
//      NFD accent stripping + lower-casing, split on whitespace and punctuation;
//   3. per word: longer than max_word_chars code points -> [UNK]; the whole word if it is in
//      the vocabulary; else greedy longest-match-first pieces, the first plain and the rest
//      with the "##" prefix; a word any of whose positions no piece matches -> one [UNK].
// vocab.txt: one token per line, id = line number from 0 (a trailing CR is dropped).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "data_pipeline/text/vocab_index.h"
#include "data_pipeline/tokenizer.h"

namespace tupe::data_pipeline {

struct WordPieceOptions {
  std::string vocab_path;        ///< BERT vocab.txt
  bool lower_case = true;        ///< lower-case (full Unicode mapping)
  bool strip_accents = true;     ///< NFD + drop Mn (BERT ties it to lower_case)
  int64_t max_word_chars = 100;  ///< longer words become [UNK] (code points)
};

/// The tokens of a vocab.txt, index = id. Throws tupe::Error "<path>: <cause>" when the
/// file is missing or unreadable, empty, not UTF-8 ("line L: invalid UTF-8 at byte N"),
/// or has an empty token, a token with a space/tab/control character, or a duplicate
/// ("line L: duplicate token 'x' (first on line M)"); lines are counted from 1.
/// `sha256` (optional) receives the hex SHA-256 of the file's bytes.
std::vector<std::string> read_wordpiece_vocab(const std::string& path, std::string* sha256 = nullptr);

class WordPieceTokenizer final : public Tokenizer {
 public:
  /// Loads the vocabulary (read_wordpiece_vocab). Throws tupe::Error "<path>: <cause>" as
  /// that does, and "<path>: special token [X] missing" when one of the five is absent.
  explicit WordPieceTokenizer(const WordPieceOptions& options);

  std::vector<int32_t> encode(std::string_view text) const override;
  /// Appends the ids of `text` to `ids` (reusing its capacity); throws InvalidUtf8 as encode().
  void encode_into(std::string_view text, std::vector<int32_t>& ids) const;
  /// Tokens joined by spaces, "##" pieces glued to the previous token without the prefix.
  /// Throws tupe::Error for an id outside [0, vocab_size).
  std::string decode(const std::vector<int32_t>& ids) const override;
  int64_t vocab_size() const override { return static_cast<int64_t>(tokens_.size()); }
  std::string piece(int32_t id) const override { return id_to_token(id); }
  SpecialTokens special_tokens() const override { return special_; }
  std::string kind() const override { return "wordpiece"; }
  bool lower_case() const override { return options_.lower_case; }
  std::string vocab_sha256() const override { return sha256_; }

  /// Id of a token string ("##" prefix included), or -1.
  int32_t token_to_id(std::string_view token) const { return index_.find(token); }
  /// Token string of `id`; throws tupe::Error outside [0, vocab_size).
  const std::string& id_to_token(int32_t id) const;

  /// Appends the WordPiece ids of one normalised word (`num_chars` code points).
  void encode_word(std::string_view word, size_t num_chars, std::vector<int32_t>& ids) const;

 private:
  void encode_segment(std::string_view text, std::vector<int32_t>& ids) const;

  WordPieceOptions options_;
  std::vector<std::string> tokens_;  // id -> token
  VocabIndex index_;                 // every token -> id
  VocabIndex continuation_index_;    // "##x" tokens, keyed by x
  SpecialTokens special_;
  std::string sha256_;
};

}  // namespace tupe::data_pipeline
