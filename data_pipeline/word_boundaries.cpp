#include "data_pipeline/word_boundaries.h"

#include <algorithm>
#include <string_view>

#include "common/error.h"

namespace tupe::data_pipeline {

WordBoundaries::WordBoundaries(std::vector<uint8_t> continues, std::string vocab_sha256)
    : continues_(std::move(continues)), vocab_sha256_(std::move(vocab_sha256)) {
  TUPE_CHECK(!continues_.empty(), "word boundaries: an empty vocabulary");
}

std::shared_ptr<const WordBoundaries> WordBoundaries::of(const Tokenizer& tokenizer) {
  const int64_t n = tokenizer.vocab_size();
  const SpecialTokens s = tokenizer.special_tokens();
  const bool wordpiece = tokenizer.kind() == "wordpiece";
  constexpr std::string_view kSpaceMarker = "\xE2\x96\x81";  // U+2581, SentencePiece's word start
  std::vector<uint8_t> table(static_cast<size_t>(n), 0);
  for (int64_t i = 0; i < n; ++i) {
    const auto id = static_cast<int32_t>(i);
    if (id == s.pad || id == s.unk || id == s.cls || id == s.sep || id == s.mask) continue;
    const std::string p = tokenizer.piece(id);
    const std::string_view v(p);
    table[static_cast<size_t>(i)] = wordpiece ? (v.substr(0, 2) == "##") : (v.substr(0, 3) != kSpaceMarker);
  }
  return std::make_shared<const WordBoundaries>(std::move(table), tokenizer.vocab_sha256());
}

int64_t WordBoundaries::continuation_count() const {
  return static_cast<int64_t>(std::count(continues_.begin(), continues_.end(), uint8_t{1}));
}

}  // namespace tupe::data_pipeline
