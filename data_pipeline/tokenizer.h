// The tokenizer interface the data path codes against (WordPiece from a BERT vocab.txt,
// or a SentencePiece model trained on a corpus). Ids are int32; special tokens are
// required to exist in every vocabulary.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace tupe::data_pipeline {

/// Ids of the special tokens ([PAD], [CLS], [SEP], [MASK], [UNK]).
struct SpecialTokens {
  int32_t pad = 0;    ///< [PAD]
  int32_t unk = 100;  ///< [UNK]
  int32_t cls = 101;  ///< [CLS]
  int32_t sep = 102;  ///< [SEP]
  int32_t mask = 103; ///< [MASK]
};

/// Text -> token ids. Implementations are immutable after construction and safe to call
/// from several threads at once.
class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  /// Token ids of `text` (UTF-8; no special tokens added). Throws tupe::Error on invalid UTF-8.
  virtual std::vector<int32_t> encode(std::string_view text) const = 0;
  /// The token strings of `ids` joined for reading (WordPiece "##" pieces glued).
  virtual std::string decode(const std::vector<int32_t>& ids) const = 0;
  /// Number of ids (vocabulary size).
  virtual int64_t vocab_size() const = 0;
  /// The vocabulary's entry for `id` as written there ("##ing" for WordPiece, "▁the" for
  /// SentencePiece, "[CLS]"). Throws tupe::Error outside [0, vocab_size).
  virtual std::string piece(int32_t id) const = 0;
  virtual SpecialTokens special_tokens() const = 0;
  /// "wordpiece" or "sentencepiece".
  virtual std::string kind() const = 0;
  /// Lower-casing applied before tokenisation.
  virtual bool lower_case() const = 0;
  /// Hex SHA-256 of the vocabulary file's bytes: the identity of the id space (shards and
  /// checkpoints carry it; a mismatch is refused).
  virtual std::string vocab_sha256() const = 0;
};

}  // namespace tupe::data_pipeline
