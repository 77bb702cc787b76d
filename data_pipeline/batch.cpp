#include "data_pipeline/batch.h"

#include <ATen/ATen.h>
#include <ATen/Context.h>

#include <algorithm>
#include <cstring>

#include "common/error.h"

namespace tupe::data_pipeline {

MlmBatch slice_rows(const MlmBatch& batch, int64_t begin, int64_t end) {
  const int64_t b = batch.rows();
  TUPE_CHECK(begin >= 0 && begin <= end && end <= b, "data: row slice [" << begin << ", " << end << ") of a batch of "
                                                                         << b << " rows");
  TUPE_CHECK(batch.masked_positions.is_cpu(), "data: row slices are taken of host batches");
  MlmBatch out = batch;
  const int64_t len = batch.input_ids.size(1);
  out.input_ids = batch.input_ids.narrow(0, begin, end - begin);
  out.attention_mask = batch.attention_mask.narrow(0, begin, end - begin);
  if (batch.segment_ids.defined()) out.segment_ids = batch.segment_ids.narrow(0, begin, end - begin);
  if (batch.next_sentence_labels.defined())
    out.next_sentence_labels = batch.next_sentence_labels.narrow(0, begin, end - begin);
  out.sample_indices = batch.sample_indices.narrow(0, begin, end - begin);
  // Masked positions ascend (row * L + column), so the slice's are one contiguous range.
  const at::Tensor positions = batch.masked_positions.contiguous();
  const int64_t* p = positions.data_ptr<int64_t>();
  const int64_t m = positions.numel();
  const int64_t lo = std::lower_bound(p, p + m, begin * len) - p, hi = std::lower_bound(p, p + m, end * len) - p;
  out.masked_labels = batch.masked_labels.narrow(0, lo, hi - lo);
  out.masked_positions = at::empty({hi - lo}, positions.options().pinned_memory(positions.is_pinned()));
  at::sub_out(out.masked_positions, positions.narrow(0, lo, hi - lo), begin * len);
  return out;
}

MlmBatch to_device(const MlmBatch& b, const c10::Device& device) {
  if (device.is_cpu()) return b;
  MlmBatch out = b;
  const bool non_blocking = true;  // pinned batches copy asynchronously
  out.input_ids = b.input_ids.to(device, non_blocking);
  out.attention_mask = b.attention_mask.to(device, non_blocking);
  if (b.segment_ids.defined()) out.segment_ids = b.segment_ids.to(device, non_blocking);
  out.masked_positions = b.masked_positions.to(device, non_blocking);
  out.masked_labels = b.masked_labels.to(device, non_blocking);
  return out;
}

namespace {
/// The masker of `config`, after the rule that stored masks admit only the token strategy.
Masker make_masker(const PretrainDataset& dataset, const DataOptions& config, uint64_t mask_seed,
                   std::shared_ptr<const WordBoundaries> words) {
  const DatasetInfo& info = dataset.info();
  TUPE_CHECK(config.mask_strategy == MaskStrategy::kToken || !(info.has_static_masks && config.use_static_masks),
             "data.mask_strategy = " << to_string(config.mask_strategy) << ": "
                                     << (info.files.empty() ? std::string("the dataset") : info.files.front())
                                     << " holds stored masks, which data.use_static_masks = true uses as they are; "
                                        "set data.use_static_masks = false to mask dynamically");
  return Masker(config.masking(), info.special, info.vocab_size, mask_seed, std::move(words));
}
}  // namespace

BatchBuilder::BatchBuilder(std::shared_ptr<const PretrainDataset> dataset, const DataOptions& config,
                           uint64_t mask_seed, std::shared_ptr<const WordBoundaries> words)
    : dataset_(std::move(dataset)),
      config_(config),
      masker_(make_masker(*dataset_, config, mask_seed, std::move(words))),
      static_masks_(dataset_->info().has_static_masks && config.use_static_masks) {
  config_.validate();
  TUPE_CHECK(config_.pin_memory != PinMemory::kOn || at::hasCUDA(),
             "data.pin_memory: page-locked memory needs CUDA, which this process does not have");
}

int64_t BatchBuilder::masked_count(int64_t index) const {
  if (static_masks_) return dataset_->static_mask_count(index);
  if (!masker_.count_known_without_reading()) return -1;
  return masker_.masked_count_for(dataset_->ordinary_tokens(index));
}

int64_t BatchBuilder::padded_length(const std::vector<int64_t>& step_indices) const {
  const int64_t max_len = dataset_->info().max_seq_len;
  if (config_.pad_to_max_seq_len) return max_len;
  int64_t longest = 1;
  for (const int64_t i : step_indices) longest = std::max(longest, dataset_->length(i));
  const int64_t m = config_.pad_to_multiple;
  return std::min(max_len, (longest + m - 1) / m * m);
}

void BatchBuilder::mask_sample(int64_t epoch, int64_t index, BatchWorkspace& ws) const {
  Sample& s = ws.sample;
  if (static_masks_) {
    ws.masked.clear();
    for (size_t k = 0; k < s.masked_positions.size(); ++k)
      ws.masked.push_back({s.masked_positions[k], s.masked_labels[k], s.token_ids[static_cast<size_t>(s.masked_positions[k])]});
    return;
  }
  // Stored masks not used: restore the original ids first, then mask dynamically.
  for (size_t k = 0; k < s.masked_positions.size(); ++k)
    s.token_ids[static_cast<size_t>(s.masked_positions[k])] = s.masked_labels[k];
  masker_.mask(epoch, index, s.token_ids.data(), static_cast<int64_t>(s.token_ids.size()), ws.masked, ws.scratch);
  for (const auto& m : ws.masked) s.token_ids[static_cast<size_t>(m.position)] = m.replacement;
}

MlmBatch BatchBuilder::build(int64_t epoch, const std::vector<int64_t>& step_indices, int64_t row_begin,
                             int64_t row_end, BatchWorkspace& ws) const {
  const auto global_rows = static_cast<int64_t>(step_indices.size());
  TUPE_CHECK(row_begin >= 0 && row_begin <= row_end && row_end <= global_rows,
             "data: rows [" << row_begin << ", " << row_end << ") of a step of " << global_rows);
  const DatasetInfo& info = dataset_->info();
  const int64_t b = row_end - row_begin;
  const int64_t len = padded_length(step_indices);
  const auto opts = at::TensorOptions().dtype(at::kLong).pinned_memory(config_.pin_memory == PinMemory::kOn);

  MlmBatch batch;
  batch.epoch = epoch;
  batch.global_rows = global_rows;
  batch.input_ids = at::empty({b, len}, opts);
  batch.attention_mask = at::empty({b, len}, opts);
  batch.sample_indices = at::empty({b}, opts);
  if (info.has_segment_ids) batch.segment_ids = at::empty({b, len}, opts);
  if (info.has_next_sentence_labels) batch.next_sentence_labels = at::empty({b}, opts);
  int64_t* ids_out = batch.input_ids.data_ptr<int64_t>();
  int64_t* att_out = batch.attention_mask.data_ptr<int64_t>();
  int64_t* seg_out = info.has_segment_ids ? batch.segment_ids.data_ptr<int64_t>() : nullptr;
  int64_t* nsp_out = info.has_next_sentence_labels ? batch.next_sentence_labels.data_ptr<int64_t>() : nullptr;
  int64_t* idx_out = batch.sample_indices.data_ptr<int64_t>();
  const int64_t pad = info.special.pad;

  ws.positions.clear();
  ws.labels.clear();
  dataset_->prefetch(step_indices.data() + row_begin, b);  // this rank's rows read ahead together
  for (int64_t r = 0; r < b; ++r) {
    const int64_t index = step_indices[static_cast<size_t>(row_begin + r)];
    dataset_->get(index, ws.sample);
    const auto n = static_cast<int64_t>(ws.sample.token_ids.size());
    TUPE_CHECK(n <= len, "data: sample " << index << " has " << n << " tokens, more than the padded length " << len);
    mask_sample(epoch, index, ws);
    int64_t* row = ids_out + r * len;
    for (int64_t j = 0; j < n; ++j) row[j] = ws.sample.token_ids[static_cast<size_t>(j)];
    std::fill(row + n, row + len, pad);
    std::fill(att_out + r * len, att_out + r * len + n, int64_t{1});
    std::fill(att_out + r * len + n, att_out + (r + 1) * len, int64_t{0});
    if (seg_out) {
      for (int64_t j = 0; j < n; ++j) seg_out[r * len + j] = ws.sample.segment_ids[static_cast<size_t>(j)];
      std::fill(seg_out + r * len + n, seg_out + (r + 1) * len, int64_t{0});
    }
    if (nsp_out) nsp_out[r] = ws.sample.next_sentence_label;
    idx_out[r] = index;
    for (const auto& m : ws.masked) {
      ws.positions.push_back(r * len + m.position);
      ws.labels.push_back(m.original);
    }
  }
  const auto m = static_cast<int64_t>(ws.positions.size());
  batch.masked_positions = at::empty({m}, opts);
  batch.masked_labels = at::empty({m}, opts);
  if (m > 0) {
    std::memcpy(batch.masked_positions.data_ptr<int64_t>(), ws.positions.data(), static_cast<size_t>(m) * 8);
    std::memcpy(batch.masked_labels.data_ptr<int64_t>(), ws.labels.data(), static_cast<size_t>(m) * 8);
  }

  // Masked tokens of the other ranks' rows: counted from the dataset's per-sample numbers.
  // Unknown (-1) when the strategy makes them depend on samples this rank does not read.
  int64_t total = m;
  for (int64_t r = 0; r < global_rows && total >= 0; ++r) {
    if (r >= row_begin && r < row_end) continue;
    const int64_t other = masked_count(step_indices[static_cast<size_t>(r)]);
    total = other < 0 ? -1 : total + other;
  }
  batch.global_masked_count = total;
  return batch;
}

}  // namespace tupe::data_pipeline
