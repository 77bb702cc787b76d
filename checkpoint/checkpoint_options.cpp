#include "checkpoint/checkpoint_options.h"

#include "common/error.h"

namespace tupe::checkpoint {

void CheckpointOptions::validate() const {
  TUPE_CHECK(!dir.empty(), "checkpoint.dir: must not be empty");
  TUPE_CHECK(every_steps >= 0, "checkpoint.every_steps: must be >= 0 (0 = only at the end), got " << every_steps);
  TUPE_CHECK(keep_last >= 0, "checkpoint.keep_last: must be >= 0 (0 = keep all), got " << keep_last);
  TUPE_CHECK(keep_every >= 0, "checkpoint.keep_every: must be >= 0 (0 = none), got " << keep_every);
}

const FieldTable<CheckpointOptions>& CheckpointOptions::fields() {
  using C = CheckpointOptions;
  static const FieldTable<C> table = [] {
    FieldTable<C> t;
    t.path("dir", &C::dir, "folder of the step_<8 digits>/ checkpoints")
        .integer("every_steps", &C::every_steps, "save interval (optimizer steps); 0 = only at the end")
        .integer("keep_last", &C::keep_last, "newest checkpoints kept; 0 = keep all")
        .integer("keep_every", &C::keep_every, "also keep steps that are multiples of this; 0 = none");
    return t;
  }();
  return table;
}

}  // namespace tupe::checkpoint
