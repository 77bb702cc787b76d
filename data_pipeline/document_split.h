// Which split a document goes to: a property of the document. With split = ratio, a document
// goes to validation when
//     uniform(rng_key(split, preprocess.seed, FNV-1a 64 of T, |T|)) < validation_ratio,
// T being its text as the tokenizer reads it: its non-blank lines (for_each_line's), each
// followed by one \n. So the split does not depend on the container (text, JSON lines, Parquet,
// Arrow, compressed or not), the piece size, the rank count or the document's place in its
// file, and identical documents share a split (no copy of a validation document is trained on).
// Shards record the rule in their attribute split_rule (shard_format.h); shards written before
// it keyed the draw by (file index, first byte) and read as "file_offset".
#pragma once
#include <cstdint>
#include <string_view>

#include "common/fnv1a.h"
#include "data_pipeline/counter_rng.h"
#include "data_pipeline/preprocess.h"

namespace tupe::data_pipeline {

/// The shard attribute split_rule of shards written by this build.
inline constexpr const char* kSplitRuleDocumentText = "document_text";
/// The split rule of shards without the attribute.
inline constexpr const char* kSplitRuleFileOffset = "file_offset";

/// T's digest, one line at a time (add_line(line) for each non-blank line, in order).
struct DocumentDigest {
  uint64_t hash = kFnv1a64Basis;
  uint64_t bytes = 0;
  void add_line(std::string_view line) {
    hash = fnv1a_64("\n", fnv1a_64(line, hash));
    bytes += line.size() + 1;
  }
};

/// Whether a document's split is drawn from its text (split = ratio, validation_ratio > 0);
/// otherwise every document goes to one split and no digest is needed.
inline bool split_needs_text(const PreprocessOptions& config) {
  return config.split == SplitMode::kRatio && config.validation_ratio > 0;
}

/// Whether the document of digest `d` goes to validation (the rule above).
inline bool goes_to_validation(const PreprocessOptions& config, const DocumentDigest& d) {
  if (config.split == SplitMode::kValidation) return true;
  if (config.validation_ratio <= 0) return false;
  CounterRng rng(rng_key(RngDomain::kSplit, static_cast<uint64_t>(config.seed), d.hash, d.bytes));
  return rng.uniform() < config.validation_ratio;
}

}  // namespace tupe::data_pipeline
