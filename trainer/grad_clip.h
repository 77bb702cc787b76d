// Global gradient-norm clipping (torch.nn.utils.clip_grad_norm_ semantics, fp32 accumulation).
#pragma once
#include <vector>

#include "trainer/named_tensors.h"

namespace tupe::trainer {

/// The defined grads of `params`, in order (tensors share storage with the grads).
std::vector<at::Tensor> gradients_of(const NamedTensors& params);

/// Global L2 norm sqrt(sum_i ||g_i||^2) over all `grads` (any float dtype, one device),
/// accumulated in float32 (fp16/bf16 grads are upcast per element, so their squares do
/// not overflow). inf/NaN in any grad give an inf/NaN result. 0 for an empty list.
double global_grad_norm(const std::vector<at::Tensor>& grads);

/// Clips in place: when the norm N is finite and N > max_norm, every grad is multiplied by
/// max_norm / (N + 1e-6) (as PyTorch). A non-finite N leaves the grads untouched (the loss
/// scaler skips that step). max_norm <= 0 only measures. Returns the pre-clip norm N.
double clip_grad_norm(const std::vector<at::Tensor>& grads, double max_norm);

}  // namespace tupe::trainer
