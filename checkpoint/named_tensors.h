// Named tensor lists: the currency between the trainer's building blocks and the model
// (a model's named_parameters(), an optimizer's state, a checkpoint file's contents).
#pragma once
#include <ATen/core/Tensor.h>

#include <string>
#include <utility>
#include <vector>

namespace tupe::checkpoint {

/// Ordered (name, tensor) pairs, e.g. a module's named_parameters() in registration order.
using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

/// The tensor called `name`, or an undefined tensor when absent.
at::Tensor find_tensor(const NamedTensors& tensors, const std::string& name);

/// Copies `source` into `targets` (in place, under NoGradGuard, converting dtype/device as
/// the target's): every target name must be in `source` and vice versa, with equal shapes,
/// and a floating-point target takes floating-point data only (an integer or bool tensor
/// there is damage, not a conversion). Throws ONE tupe::Error "<where>: ..." listing every
/// missing, unexpected, mis-shaped and mis-typed name (e.g. "missing: encoder.0.weight;
/// shape of x: saved [3] vs current [4]").
void copy_named_tensors(const NamedTensors& targets, const NamedTensors& source, const std::string& where);

/// "[2, 3]" for sizes {2, 3}.
std::string shape_text(at::IntArrayRef sizes);

}  // namespace tupe::checkpoint
