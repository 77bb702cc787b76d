// Training a SentencePiece vocabulary (unigram or BPE) on a corpus, with BERT's special
// tokens reserved at fixed ids: [PAD] 0, [UNK] 1, [CLS] 2, [SEP] 3, [MASK] 4
// (SentencePiece's pad / unk / bos / eos pieces and one control symbol, so none of them is
// ever produced from text). The result loads with SentencePieceTokenizer.
// The corpus is read as `tupe preprocess` reads it (corpus.h, corpus_stream.h): text or JSON
// lines, plain, gzip or zstd, files or folders of them; every non-blank line (of a record's
// text, for JSON lines) is one sentence of the trainer's, streamed to it by a reader thread.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "common/config_fields.h"
#include "data_pipeline/corpus_stream.h"

namespace tupe::data_pipeline {

/// Reserved ids of a trained model (see the file comment).
struct SentencePieceReservedIds {
  static constexpr int32_t kPad = 0;
  static constexpr int32_t kUnk = 1;
  static constexpr int32_t kCls = 2;
  static constexpr int32_t kSep = 3;
  static constexpr int32_t kMask = 4;
};

/// The SentencePiece model trained (vocab.model_type).
enum class SentencePieceModelType {
  kUnigram,  ///< unigram language model (Kudo 2018)
  kBpe,      ///< byte-pair encoding (Sennrich et al. 2016)
};
inline constexpr Choice<SentencePieceModelType> kModelTypeWords[] = {{"unigram", SentencePieceModelType::kUnigram},
                                                                    {"bpe", SentencePieceModelType::kBpe}};
/// "unigram" | "bpe" (SentencePiece's own names of the two).
std::string to_string(SentencePieceModelType t);
/// Parses "unigram" | "bpe"; throws tupe::Error "<key>: expected unigram or bpe, got '<text>'".
SentencePieceModelType parse_sentencepiece_model_type(const std::string& key, const std::string& text);

/// [vocab] section (`tupe vocab`). Every field -- its meaning, unit, default and range -- is
/// described once, in the field table in sentencepiece_train.cpp (common/config_fields.h;
/// docs/config.md).
struct VocabOptions {
  VocabOptions() { fields().reset(*this); }
  std::string input;
  InputFormat input_format;
  std::string text_field;
  std::string model;
  int64_t vocab_size;
  SentencePieceModelType model_type;
  bool lower_case;
  double character_coverage;
  int64_t max_sentence_bytes;
  int64_t input_sentence_size;
  int64_t num_threads;
  int64_t seed;

  /// The values given: ranges and words. Throws tupe::Error "vocab.<key>: <cause>" (what other
  /// subcommands check of a [vocab] section they do not read; cli/config_cli.h).
  void check_values() const;
  /// check_values(), and what training needs: input files and an output path. Throws
  /// tupe::Error "vocab.<key>: <cause>" (pure; does not touch files).
  void validate() const;
  static const FieldTable<VocabOptions>& fields();
};

/// What train_sentencepiece() wrote.
struct SentencePieceTrainResult {
  std::string model_path;   ///< the .model file
  std::string vocab_path;   ///< "<piece>\t<score>" per line, id = line number from 0
  int64_t vocab_size = 0;   ///< pieces
  std::string sha256;       ///< hex SHA-256 of the .model bytes (the tokenizer's vocab_sha256)
};

/// Trains and writes the model and its listing (temp file + rename: a failed run leaves no
/// model behind). The inputs are listed first (list_input_files: "<path>: no such file or
/// directory", "<path>: empty file", ...) and the model's folder is created before training
/// ("<folder>: cannot create the output folder (<cause>)"). Logs (log::info) what it reads
/// and when reading ends. Throws tupe::Error for bad text ("<file>: line L: invalid UTF-8 at
/// byte N: <cause>", "<file>: line L: <JSON record's fault>"), and "<model>: SentencePiece
/// training failed: <status>" when the trainer refuses (e.g. vocab_size too large for the
/// corpus). Not thread-safe: it sets SentencePiece's process-wide random seed.
SentencePieceTrainResult train_sentencepiece(const VocabOptions& options);

}  // namespace tupe::data_pipeline
