// GLUE examples -> model inputs with the pre-training tokenizer (BERT's run_classifier
// layout): single sentences [CLS] A [SEP], pairs [CLS] A [SEP] B [SEP]; when A and B do not
// fit, longest-first truncation removes one token at a time from the end of the longer one
// (B on a tie) until the whole fits max_length. Segment ids: 0 for [CLS] A [SEP], 1 for
// B [SEP] (used only when the model has a segment embedding, model.type_vocab_size > 0).
// Shape legend: B batch rows, L longest sequence of the batch (dynamic padding).
#pragma once
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <string>
#include <vector>

#include "data_pipeline/tokenizer.h"
#include "trainer/finetune/tasks/reader.h"

namespace tupe::finetune {

/// Removes tokens from the ends of `a` and `b`, one at a time from the longer (b on a tie),
/// until a.size() + b.size() <= max_tokens. Returns true when anything was removed.
bool truncate_longest_first(std::vector<int32_t>& a, std::vector<int32_t>& b, size_t max_tokens);

/// One encoded example.
struct EncodedExample {
  std::vector<int32_t> ids;          ///< [CLS] A [SEP] (B [SEP]), at most max_length ids
  int32_t first_segment_length = 0;  ///< tokens of [CLS] A [SEP] (segment 0); the rest is segment 1
  bool truncated = false;            ///< A and/or B were cut to fit
};

/// Encodes `a` (and `b` when `pair`) with `tokenizer`. max_length counts the special tokens
/// and must be >= 3 for pairs, >= 2 otherwise (tupe::Error). Throws tupe::Error from the
/// tokenizer on invalid UTF-8.
EncodedExample encode_example(const data_pipeline::Tokenizer& tokenizer, const std::string& a, const std::string& b,
                              bool pair, int64_t max_length);

/// A split encoded, with its targets.
struct EncodedSplit {
  std::string name;                               ///< the split's name ("dev_matched", ...)
  std::vector<std::vector<int32_t>> ids;          ///< per example, see EncodedExample
  std::vector<int32_t> first_segment_length;      ///< per example
  std::vector<int64_t> labels;                    ///< per example: label id (classification, labelled)
  std::vector<double> scores;                     ///< per example: gold score (regression, labelled)
  std::vector<std::string> index;                 ///< per example: the file's index (test files)
  int64_t truncated = 0;                          ///< examples cut to max_length
  int64_t total_tokens = 0;                       ///< sum of encoded lengths
  size_t size() const { return ids.size(); }
};

/// Encodes every example of `split` (pairs when split has a second sentence), on
/// `num_threads` threads (>= 1; the result does not depend on it). Errors name the file
/// and line of the example.
EncodedSplit encode_split(const data_pipeline::Tokenizer& tokenizer, const TaskSpec& task, const SplitData& split,
                          bool pair, int64_t max_length, int num_threads);

/// Model inputs of some rows of an encoded split, padded to their longest row.
struct TaskBatch {
  at::Tensor input_ids;       ///< (B, L) int64, [PAD] after each row's end
  at::Tensor attention_mask;  ///< (B, L) int64, 1 real token, 0 padding
  at::Tensor segment_ids;     ///< (B, L) int64 0/1; undefined when not asked for
  at::Tensor labels;          ///< (B) int64 label ids (classification, labelled splits), else undefined
  at::Tensor scores;          ///< (B) float32 gold scores (regression, labelled splits), else undefined
};

/// Builds the batch of `rows` (indices into `split`, not empty) on `device`.
TaskBatch make_batch(const EncodedSplit& split, const std::vector<int64_t>& rows, int32_t pad_id, bool with_segments,
                     const c10::Device& device);

}  // namespace tupe::finetune
