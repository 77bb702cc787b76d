// Packing token streams into pre-training sequences (RoBERTa, Liu et al. 2019, sec. 4.2).
//
// Each sequence is [CLS] t_1 ... t_k [SEP] with k <= max_seq_len - 2 content tokens.
//   full_sentences  (FULL-SENTENCES) one stream runs over whole documents in order; a [SEP]
//                   separates consecutive documents; the stream is cut every max_seq_len - 2
//                   content tokens, so every sequence is full except the last of a stream.
//                   Rules at the cuts: a document separator is never the first content token
//                   of a sequence (the closing [SEP] of the previous one already separates),
//                   and never its last content token (the sequence is closed one token early
//                   instead of ending [SEP] [SEP]); so such a sequence is max_seq_len - 1 long.
//   document        (DOC-SENTENCES) the stream restarts at each document: sequences never
//                   cross a document boundary and a document's last sequence may be short.
// A stream is one piece of one input file (preprocess.h); sentences longer than the content
// size are cut like everything else.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/config_fields.h"
#include "data_pipeline/tokenizer.h"

namespace tupe::data_pipeline {

/// How documents fill sequences (preprocess.packing).
enum class Packing {
  kFullSentences,  ///< RoBERTa FULL-SENTENCES: a sequence may cross document boundaries
  kDocument,       ///< a sequence holds text of one document only
};
/// The words of Packing in configs and shard headers.
inline constexpr Choice<Packing> kPackingWords[] = {{"full_sentences", Packing::kFullSentences},
                                                    {"document", Packing::kDocument}};
/// "full_sentences" | "document"; throws tupe::Error "<key>: expected full_sentences or document, got '<text>'".
Packing parse_packing(const std::string& key, const std::string& text);
/// "full_sentences" | "document".
std::string to_string(Packing p);

/// Receives each finished sequence (ids, length) including [CLS] and the closing [SEP].
using SequenceSink = std::function<void(const int32_t* ids, int64_t length)>;

/// Packs the documents of one stream. Not thread-safe; one per stream.
class SequencePacker {
 public:
  /// max_seq_len >= 3 tokens; `sink` is called for every finished sequence.
  SequencePacker(Packing packing, int64_t max_seq_len, SpecialTokens special, SequenceSink sink);
  /// Starts a document (call before its first add_tokens).
  void begin_document();
  /// Appends content tokens of the current document (e.g. one sentence).
  void add_tokens(const std::vector<int32_t>& ids);
  /// Ends the stream: emits the last, possibly short, sequence.
  void finish();
  /// Sequences emitted so far.
  int64_t num_sequences() const { return num_sequences_; }

 private:
  void push(int32_t id);
  void emit();

  Packing packing_;
  int64_t content_max_;  // max_seq_len - 2
  SpecialTokens special_;
  SequenceSink sink_;
  std::vector<int32_t> seq_;   // [CLS] + content so far
  bool stream_has_doc_ = false;
  bool pending_separator_ = false;  // a [SEP] owed before the next content token
  int64_t num_sequences_ = 0;
};

}  // namespace tupe::data_pipeline
