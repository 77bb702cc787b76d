// The optimizer's state as a checkpoint stores it (optimizer.safetensors; docs/formats.md
// "Checkpoints"). trainer::Optimizer::state_dict() writes it, load_state_dict() reads it.
#pragma once
#include "checkpoint/named_tensors.h"
#include "checkpoint/safetensors.h"

namespace tupe::checkpoint {

/// Optimizer state as named tensors for checkpoints: "<param>/exp_avg", "<param>/exp_avg_sq"
/// (dtype and shape of the parameter) and "<param>/step" (int64, shape []); metadata holds
/// "optimizer" (the kind), "format_version" and the hyperparameters (for reading only).
struct OptimizerState {
  NamedTensors tensors;
  TensorMetadata metadata;
};

}  // namespace tupe::checkpoint
