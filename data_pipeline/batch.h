// Masked batches as tensors, and the builder that makes one from sample indices.
//
// Shape legend: b = rows of this rank's batch, L = padded length of the step (the longest
// sequence of the whole global batch rounded up to data.pad_to_multiple, at most max_seq_len;
// or max_seq_len with data.pad_to_max_seq_len), M = masked tokens of the b rows.
// Every rank of a step gets the same L, and a row's contents depend only on its global
// sample index and the epoch: global step t looks the same for every world size.
#pragma once
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "data_pipeline/dataset.h"
#include "data_pipeline/loader_config.h"
#include "data_pipeline/masker.h"

namespace tupe::data_pipeline {

struct MlmBatch {
  at::Tensor input_ids;             ///< [b, L] int64, masked input, [PAD] after the real tokens
  at::Tensor attention_mask;        ///< [b, L] int64, 1 = real token, 0 = padding
  at::Tensor segment_ids;           ///< [b, L] int64 (0/1) when the dataset has them, else undefined
  at::Tensor masked_positions;      ///< [M] int64 flat indices row * L + column into b*L, ascending
  at::Tensor masked_labels;         ///< [M] int64 original ids at those positions
  at::Tensor next_sentence_labels;  ///< [b] int64 when the dataset has them, else undefined
  at::Tensor sample_indices;        ///< [b] int64 global sample indices of the rows
  int64_t epoch = 0;                ///< epoch of the step
  int64_t first_position = 0;       ///< global position of the step's first sample in the epoch order
  int64_t global_rows = 0;          ///< sequences in the step over all ranks
  /// Masked tokens of the step over all ranks (sum of every rank's M); -1 when the masking
  /// strategy makes it depend on the other ranks' samples (whole_word, span: the training step
  /// all-reduces the counts itself, trainer/train_step.h).
  int64_t global_masked_count = 0;
  int64_t rows() const { return input_ids.defined() ? input_ids.size(0) : 0; }
};

/// Rows [begin, end) of a host batch as a batch (for micro-batches): tensors narrowed (views),
/// masked positions re-based to the slice. Step fields are copied; global_masked_count stays
/// the step's. A pinned batch gives a pinned slice (every tensor), so its copy to the GPU
/// stays asynchronous. Throws tupe::Error for a bad range or a batch not on the CPU.
MlmBatch slice_rows(const MlmBatch& batch, int64_t begin, int64_t end);

/// `batch` with every tensor on `device` (the batch itself for the CPU). The copies are
/// non-blocking: from a pinned batch they run asynchronously on the current stream.
MlmBatch to_device(const MlmBatch& batch, const c10::Device& device);

/// Reused per-thread storage of BatchBuilder::build.
struct BatchWorkspace {
  Sample sample;
  std::vector<MaskedToken> masked;
  std::vector<int32_t> scratch;
  std::vector<int64_t> positions, labels;
};

/// Builds batches of one dataset; immutable, so several threads may build at once (each
/// with its own workspace).
class BatchBuilder {
 public:
  /// `mask_seed` keys the dynamic masks (data.seed for training, data.validation_seed for
  /// evaluation); `words` are the vocabulary's word boundaries (needed by data.mask_strategy =
  /// whole_word and span). Throws tupe::Error for pin_memory without CUDA, a strategy without
  /// `words`, or whole_word/span on stored (static) masks.
  BatchBuilder(std::shared_ptr<const PretrainDataset> dataset, const DataOptions& config, uint64_t mask_seed,
               std::shared_ptr<const WordBoundaries> words = nullptr);
  /// The batch of rows [row_begin, row_end) of a step whose global batch is `step_indices`
  /// (global sample indices in step order) in `epoch`. The masks of sample i are those of
  /// (mask_seed, epoch, i).
  MlmBatch build(int64_t epoch, const std::vector<int64_t>& step_indices, int64_t row_begin, int64_t row_end,
                 BatchWorkspace& ws) const;
  const PretrainDataset& dataset() const { return *dataset_; }

 private:
  /// Masks of sample `index` (already in ws.sample) into ws.masked; rewrites ws.sample.token_ids
  /// to the masked input.
  void mask_sample(int64_t epoch, int64_t index, BatchWorkspace& ws) const;
  int64_t padded_length(const std::vector<int64_t>& step_indices) const;
  /// Masked tokens of sample `index` (static or by the masking rule), without reading it;
  /// -1 when the strategy needs the sample (Masker::count_known_without_reading).
  int64_t masked_count(int64_t index) const;

  std::shared_ptr<const PretrainDataset> dataset_;
  DataOptions config_;
  Masker masker_;
  bool static_masks_;  // use the dataset's stored masks
};

}  // namespace tupe::data_pipeline
