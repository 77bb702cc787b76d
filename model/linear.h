// One linear layer as one dispatched op.
// torch::nn::Linear's forward (torch::nn::functional::linear) runs a (B, L, d) input as
// three top-level ops: weight.t(), matmul, add_ (and two for a 2-D input: t, addmm), each
// with its own autograd node. at::linear is one op: a contiguous (..., in) input is folded to
// 2-D and runs one addmm (bias fused into the GEMM), so forward and backward dispatch fewer
// ops and keep one node. Same math: y = x W^T + b.
#pragma once
#include <ATen/ops/linear.h>
#include <torch/nn/modules/linear.h>

namespace tupe::model {

/// x: (..., in) -> (..., out) with lin's weight (out, in) and bias (out) (if any). Under
/// autocast, casts x and the weight once. Throws c10::Error on a shape mismatch.
inline at::Tensor linear(const torch::nn::Linear& lin, const at::Tensor& x) {
  return at::linear(x, lin->weight, lin->bias);
}

}  // namespace tupe::model
