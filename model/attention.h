// Multi-head self-attention with an additive logit bias (the positional term plus the
// padding mask), through at::scaled_dot_product_attention so fused kernels serve on GPU and
// in CPU inference. CPU training with attention dropout or a bias that needs a gradient
// (where CPU SDPA falls back to its unfused math path anyway) takes explicit_attention:
// the bias add and the scale folded into one GEMM (baddbmm), softmax, model/dropout.h's
// dropout, a second GEMM.
// Shape legend: B batch, L sequence length, d model width, H heads, d_h = d / H.
//   [q | k | v] = x [W^Q; W^K; W^V]^T + [b^Q | b^K | b^V]   ONE GEMM: (B, L, d) -> (B, L, 3d)
//   q, k, v = the three d-wide column blocks: (B, L, 3d) = (B, L, 3, H, d_h), unbind(2),
//             heads to the front                                 each (B, H, L, d_h)
// The fused weight (3d, d) is the row-wise concatenation of the three registered Linear
// weights (torch Linear: W is (out, in)), built in each forward, so the parameters (and the
// checkpoint names ...attention.{query,key,value}.{weight,bias}) stay as they were and
// autograd splits the fused gradient back into them. Under autocast the linear casts x and
// the fused weight once (not three times each).
//   logits = q k^T * scale + bias       scale = 1/sqrt(d_h) (BERT), 1/sqrt(2 d_h) (TUPE Eq. 10)
//   out = (softmax(logits) v) W^O + b^O                          (B, L, d)
#pragma once
#include <ATen/core/Tensor.h>
#include <array>
#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>

#include "model/config.h"

namespace tupe::model {

/// The dtype q, k, v (and so the attention bias) take for a floating tensor `like` on its
/// device: the autocast dtype when autocast is on for that device type and would cast `like`
/// (floating, not float64: ATen's autocast::is_eligible), else like's own dtype.
at::ScalarType attention_compute_dtype(const at::Tensor& like);

class SelfAttentionImpl : public torch::nn::Module {
 public:
  explicit SelfAttentionImpl(const ModelConfig& config);
  void reset_parameters();

  /// x: (B, L, d); bias: additive, broadcastable to (B, H, L, L) (positional term plus
  /// -inf at padded keys), or undefined; best given already in attention_compute_dtype(x)
  /// (Encoder casts it once for all layers; another dtype is cast here). Returns (B, L, d).
  /// Dropout on the attention probabilities in training mode.
  at::Tensor forward(const at::Tensor& x, const at::Tensor& bias);

  /// The pre-softmax logits q k^T * scale + bias: (B, H, L, L). For tests and analysis.
  at::Tensor logits(const at::Tensor& x, const at::Tensor& bias);

  ModelConfig config;
  /// Each d -> d. query/key/value hold W^Q, W^K, W^V and their biases (checkpoint names);
  /// forward applies them fused (project_qkv), never through their own forward.
  torch::nn::Linear query{nullptr}, key{nullptr}, value{nullptr}, output{nullptr};

 private:
  /// x: (B, L, d) -> {q, k, v}, each (B, H, L, d_h) in x's (autocast) compute dtype: one
  /// linear with the fused (3d, d) weight and (3d) bias, then three strided views of it.
  std::array<at::Tensor, 3> project_qkv(const at::Tensor& x) const;
  /// q, k, v: (B, H, L, d_h); mask: broadcastable to (B, H, L, L) or undefined; p: dropout on
  /// the probabilities. Returns softmax(q k^T * scale + mask) v with dropout: (B, H, L, d_h).
  at::Tensor explicit_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& mask,
                                double p) const;
};
TORCH_MODULE(SelfAttention);

}  // namespace tupe::model
