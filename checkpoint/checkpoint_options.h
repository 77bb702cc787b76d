// Options of the checkpoint store ([checkpoint] section of `tupe pretrain`): where the
// step_<8 digits>/ folders go, how often, and which ones are kept (docs/formats.md
// "Checkpoints"). Every field -- its meaning, unit, default and range -- is described once,
// in the field table in checkpoint_options.cpp (common/config_fields.h; docs/config.md).
#pragma once
#include <cstdint>
#include <string>

#include "common/config_fields.h"

namespace tupe::checkpoint {

/// [checkpoint] section.
struct CheckpointOptions {
  CheckpointOptions() { fields().reset(*this); }
  std::string dir;
  int64_t every_steps;
  int64_t keep_last;
  int64_t keep_every;

  void validate() const;
  static const FieldTable<CheckpointOptions>& fields();
};

}  // namespace tupe::checkpoint
