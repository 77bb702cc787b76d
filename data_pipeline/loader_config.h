// Configuration of the data loader (INI section [data]): where the shards are, the global
// batch, the seeds, masking, padding and prefetching. Every field -- its meaning, unit,
// default and range -- is described once, in the field table in loader_config.cpp
// (common/config_fields.h; docs/config.md).
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
/// The words of pin_memory: auto, and the boolean words (true/1/yes/on, false/0/no/off).
inline constexpr Choice<PinMemory> kPinMemoryWords[] = {
    {"auto", PinMemory::kAuto}, {"true", PinMemory::kOn},  {"false", PinMemory::kOff}, {"1", PinMemory::kOn},
    {"yes", PinMemory::kOn},    {"on", PinMemory::kOn},    {"0", PinMemory::kOff},     {"no", PinMemory::kOff},
    {"off", PinMemory::kOff}};

struct DataOptions {
  DataOptions() { fields().reset(*this); }
  std::string train_shards;
  std::string validation_shards;
  int64_t vocab_size;
  int64_t global_batch_size;  ///< B
  int64_t seed;
  int64_t validation_seed;
  double mask_probability;
  double replace_with_mask;
  double replace_with_random;
  int64_t max_predictions;
  MaskStrategy mask_strategy;
  bool use_static_masks;
  int64_t pad_to_multiple;
  bool pad_to_max_seq_len;
  int64_t num_threads;
  int64_t prefetch_batches;
  PinMemory pin_memory;
  bool load_in_memory;
  int64_t read_cache_mb;
  bool verify_at_start;

  /// Whether batches are pinned when the trainer computes on CUDA (`cuda`) or not.
  bool pins(bool cuda) const { return pin_memory == PinMemory::kOn || (pin_memory == PinMemory::kAuto && cuda); }
  /// The field table's ranges and the masking rule (replace_with_mask + replace_with_random <= 1).
  /// Throws tupe::Error "data.<key>: <cause>".
  void validate() const;
  MaskingConfig masking() const;
  /// Options for open_pretrain_dataset of `split` with the expected vocabulary hash.
  DatasetOptions dataset_options(const std::string& split, const std::string& expected_vocab_sha256) const;
  static const FieldTable<DataOptions>& fields();
};

}  // namespace tupe::data_pipeline
