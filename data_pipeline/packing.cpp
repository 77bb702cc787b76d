#include "data_pipeline/packing.h"

#include "common/error.h"

namespace tupe::data_pipeline {

Packing parse_packing(const std::string& key, const std::string& text) {
  return parse_choice(key, text, kPackingWords);
}

std::string to_string(Packing p) { return choice_word(p, kPackingWords); }

SequencePacker::SequencePacker(Packing packing, int64_t max_seq_len, SpecialTokens special, SequenceSink sink)
    : packing_(packing), content_max_(max_seq_len - 2), special_(special), sink_(std::move(sink)) {
  TUPE_CHECK(max_seq_len >= 3, "packing: max_seq_len must be at least 3, got " << max_seq_len);
  seq_.reserve(static_cast<size_t>(max_seq_len));
  seq_.push_back(special_.cls);
}

void SequencePacker::begin_document() {
  if (packing_ == Packing::kDocument) {
    if (seq_.size() > 1) emit();
  } else if (stream_has_doc_) {
    pending_separator_ = true;
  }
}

void SequencePacker::add_tokens(const std::vector<int32_t>& ids) {
  for (const int32_t id : ids) {
    if (pending_separator_) {
      pending_separator_ = false;
      const int64_t content = static_cast<int64_t>(seq_.size()) - 1;
      if (content == content_max_ - 1) {
        emit();  // the separator would be the last content token: close early instead
      } else if (content > 0) {
        push(special_.sep);
      }
    }
    push(id);
    stream_has_doc_ = true;
  }
}

void SequencePacker::push(int32_t id) {
  seq_.push_back(id);
  if (static_cast<int64_t>(seq_.size()) - 1 == content_max_) emit();
}

void SequencePacker::emit() {
  seq_.push_back(special_.sep);
  sink_(seq_.data(), static_cast<int64_t>(seq_.size()));
  ++num_sequences_;
  seq_.resize(1);
}

void SequencePacker::finish() {
  if (seq_.size() > 1) emit();
  pending_separator_ = false;
  stream_has_doc_ = false;
}

}  // namespace tupe::data_pipeline
