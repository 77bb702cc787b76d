// Options of the checkpoint store ([checkpoint] section of `tupe pretrain`): where the
// step_<8 digits>/ folders go, how often, and which ones are kept (docs/formats.md
// "Checkpoints").
#pragma once
#include <cstdint>
#include <string>

#include "common/config_fields.h"

namespace tupe::checkpoint {

/// [checkpoint] section.
struct CheckpointOptions {
  std::string dir = "checkpoints";  ///< folder holding step_<8 digits>/ checkpoints
  int64_t every_steps = 10000;      ///< save every this many optimizer steps; 0 = only at the end
  int64_t keep_last = 3;            ///< keep the newest this many checkpoints; 0 = keep all
  /// Also keep every checkpoint whose step is a multiple of this (the paper keeps 100k, 300k,
  /// 600k, 1M); 0 = none.
  int64_t keep_every = 100000;

  void validate() const;
  static const FieldTable<CheckpointOptions>& fields();
};

}  // namespace tupe::checkpoint
