// Configuration of the data loader (INI section [data]): where the shards are, the global
// batch, the seeds, masking, padding and prefetching.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "common/config_fields.h"
#include "data_pipeline/dataset.h"
#include "data_pipeline/masker.h"

namespace tupe::data_pipeline {

/// Page-locked (pinned) batch memory, for asynchronous host-to-GPU copies.
enum class PinMemory {
  kAuto,  ///< on when the trainer computes on CUDA, off on the CPU (resolved by the trainer)
  kOn,    ///< always (needs CUDA in this process)
  kOff,   ///< never
};
std::string to_string(PinMemory p);
/// Throws tupe::Error "key 'pin_memory': expected auto, true or false, got '...'".
PinMemory parse_pin_memory(const std::string& text);

struct LoaderConfig {
  std::string train_shards;           ///< comma-separated shard files or folders (train split)
  std::string validation_shards;      ///< comma-separated shard files or folders (validation split); "" = none
  int64_t vocab_size = 0;             ///< NVIDIA shards: vocabulary size (ids); own shards: 0 or the recorded size
  int64_t global_batch_size = 256;    ///< B: sequences per optimizer step over all ranks (divisible by world size)
  int64_t seed = 1234;                ///< seed of the epoch order and the training masks
  int64_t validation_seed = 4321;     ///< seed of the validation masks (fixed: independent of the epoch)
  double mask_probability = 0.15;     ///< fraction of non-special tokens predicted per sequence
  double replace_with_mask = 0.8;     ///< of the predicted tokens: fraction shown as [MASK]
  double replace_with_random = 0.1;   ///< of the predicted tokens: fraction shown as a random id
  int64_t max_predictions = 0;        ///< cap on predicted tokens per sequence (0 = none)
  bool use_static_masks = true;       ///< NVIDIA shards: use their stored masks (false: unmask, mask dynamically)
  int64_t pad_to_multiple = 8;        ///< padded length: longest sequence of the global batch rounded up to this (tokens)
  bool pad_to_max_seq_len = false;    ///< pad every batch to the dataset's max_seq_len instead
  int64_t num_threads = 1;            ///< background threads building batches (0 = build in next())
  int64_t prefetch_batches = 4;       ///< batches built ahead at most (bounded queue)
  PinMemory pin_memory = PinMemory::kAuto;  ///< page-locked batch tensors (kOn needs CUDA; kAuto = on for CUDA)
  bool load_in_memory = false;        ///< load every shard at start (false: read on demand, on_demand.h)
  int64_t read_cache_mb = 128;        ///< on demand: decompressed-block cache per rank (MiB; compressed/NVIDIA shards)

  /// Whether batches are pinned when the trainer computes on CUDA (`cuda`) or not.
  bool pins(bool cuda) const { return pin_memory == PinMemory::kOn || (pin_memory == PinMemory::kAuto && cuda); }
  /// Throws tupe::Error "data.<key>: <cause>".
  void validate() const;
  MaskingConfig masking() const;
  /// Options for open_pretrain_dataset of `split` with the expected vocabulary hash.
  DatasetOptions dataset_options(const std::string& split, const std::string& expected_vocab_sha256) const;
  static const FieldTable<LoaderConfig>& fields();
};

}  // namespace tupe::data_pipeline
