#include "data_pipeline/text/sentencepiece_tokenizer.h"

#include <sentencepiece_processor.h>

#include "common/error.h"
#include "common/sha256.h"
#include "data_pipeline/text/utf8.h"

namespace tupe::data_pipeline {

SentencePieceTokenizer::SentencePieceTokenizer(const std::string& model_path, bool lower_case)
    : path_(model_path), processor_(std::make_unique<sentencepiece::SentencePieceProcessor>()) {
  sha256_ = file_sha256_hex(model_path);  // also: "<path>: cannot open: <reason>"
  const auto status = processor_->Load(model_path);
  TUPE_CHECK(status.ok(), model_path << ": not a SentencePiece model: " << status.ToString());
  vocab_size_ = processor_->GetPieceSize();
  auto require = [&](const char* piece) {
    const int id = processor_->PieceToId(piece);
    // PieceToId answers unk_id() for an unknown piece: check the piece really is that id.
    TUPE_CHECK(id >= 0 && processor_->IdToPiece(id) == piece, model_path << ": special token " << piece << " missing");
    return static_cast<int32_t>(id);
  };
  special_.pad = require("[PAD]");
  special_.unk = require("[UNK]");
  special_.cls = require("[CLS]");
  special_.sep = require("[SEP]");
  special_.mask = require("[MASK]");
  // The normalisation rule lives in the model (case folding or not); probe it.
  const bool folds_case = processor_->EncodeAsIds("ABC XYZ") == processor_->EncodeAsIds("abc xyz");
  TUPE_CHECK(folds_case == lower_case, model_path << ": the model " << (folds_case ? "lower-cases" : "keeps case")
                                                  << " but lower_case = " << (lower_case ? "true" : "false")
                                                  << " was asked for");
  lower_case_ = lower_case;
}

SentencePieceTokenizer::~SentencePieceTokenizer() = default;

std::vector<int32_t> SentencePieceTokenizer::encode(std::string_view text) const {
  check_utf8(text);
  std::vector<int> ids;
  const auto status = processor_->Encode(absl::string_view(text.data(), text.size()), &ids);
  TUPE_CHECK(status.ok(), path_ << ": SentencePiece encode failed: " << status.ToString());
  return std::vector<int32_t>(ids.begin(), ids.end());
}

std::string SentencePieceTokenizer::decode(const std::vector<int32_t>& ids) const {
  std::vector<int> v;
  v.reserve(ids.size());
  for (const int32_t id : ids) {
    TUPE_CHECK(id >= 0 && id < vocab_size_, path_ << ": decode: id " << id << " outside [0, " << vocab_size_ << ")");
    v.push_back(id);
  }
  std::string text;
  const auto status = processor_->Decode(v, &text);
  TUPE_CHECK(status.ok(), path_ << ": SentencePiece decode failed: " << status.ToString());
  return text;
}

std::string SentencePieceTokenizer::id_to_piece(int32_t id) const {
  TUPE_CHECK(id >= 0 && id < vocab_size_, path_ << ": id " << id << " outside [0, " << vocab_size_ << ")");
  return processor_->IdToPiece(id);
}

}  // namespace tupe::data_pipeline
