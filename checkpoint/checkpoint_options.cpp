#include "checkpoint/checkpoint_options.h"

namespace tupe::checkpoint {

void CheckpointOptions::validate() const { fields().check(*this); }

const FieldTable<CheckpointOptions>& CheckpointOptions::fields() {
  using C = CheckpointOptions;
  static const FieldTable<C> table = [] {
    FieldTable<C> t("checkpoint");
    t.path("dir", &C::dir, "checkpoints", "folder of the step_<8 digits>/ checkpoints")
        .not_empty()
        .integer("every_steps", &C::every_steps, 10000, "optimizer steps", "save interval; 0 = only at the end")
        .at_least(0)
        .integer("keep_last", &C::keep_last, 3, "", "newest checkpoints kept; 0 = keep all")
        .at_least(0)
        .integer("keep_every", &C::keep_every, 100000, "optimizer steps",
                 "also keep every checkpoint whose step is a multiple of this (the paper keeps 100k, 300k, 600k, 1M); "
                 "0 = none")
        .at_least(0);
    return t;
  }();
  return table;
}

}  // namespace tupe::checkpoint
