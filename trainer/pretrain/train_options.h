// Options of the pre-training loop ([train] section). Every field -- its meaning, unit,
// default and range -- is described once, in the field table in train_options.cpp
// (common/config_fields.h; `tupe pretrain --help` prints it, docs/config.md lists it).
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "common/config_fields.h"
#include "dist/device.h"

namespace tupe::pretrain {

struct TrainOptions {
  TrainOptions() { fields().reset(*this); }
  int64_t micro_batch_size;
  int64_t max_micro_batch_size;
  int64_t max_steps;
  int64_t log_every;
  int64_t eval_every;
  int64_t eval_batches;
  int64_t seed;
  dist::DeviceRequest device;
  int64_t threads;
  std::string metrics_dir;
  double peak_tflops;
  bool tf32;
  bool progress;
  bool tensorboard;
  std::string vocab_sha256;
  std::string init_from;
  std::string init_from_sha256;
  std::string profile_steps;  ///< "A:B": trace optimizer steps A..B (profile_step_range); "" = off

  /// The field table's ranges. Throws tupe::Error "train.<key>: <cause>".
  void validate() const;
  static const FieldTable<TrainOptions>& fields();
};

/// Optimizer steps first..last (1-based, inclusive) that train.profile_steps traces.
struct ProfileStepRange {
  int64_t first = 0, last = 0;
};

/// train.profile_steps parsed: "" or "off" -> nullopt; "A:B" with 1 <= A <= B -> {A, B}.
/// Throws ONE-line tupe::Error "train.profile_steps: '<text>' ..." naming what is wrong
/// (not A:B, a non-integer, A < 1, B < A).
std::optional<ProfileStepRange> profile_step_range(const std::string& text);

}  // namespace tupe::pretrain
