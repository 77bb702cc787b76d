// Multi-head self-attention with an additive logit bias (the positional term plus the
// padding mask), through at::scaled_dot_product_attention so fused kernels serve on GPU and
// in CPU inference. CPU training with attention dropout or a bias that needs a gradient
// (where CPU SDPA falls back to its unfused math path anyway) takes explicit_attention:
// the bias add and the scale folded into one GEMM (baddbmm), softmax, model/dropout.h's
// dropout, a second GEMM.
// Shape legend: B batch, L sequence length, d model width, H heads, d_h = d / H.
//   q = x W^Q + b^Q, k = x W^K + b^K, v = x W^V + b^V          each (B, H, L, d_h)
//   logits = q k^T * scale + bias       scale = 1/sqrt(d_h) (BERT), 1/sqrt(2 d_h) (TUPE Eq. 10)
//   out = (softmax(logits) v) W^O + b^O                          (B, L, d)
#pragma once
#include <ATen/core/Tensor.h>
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
  torch::nn::Linear query{nullptr}, key{nullptr}, value{nullptr}, output{nullptr};  ///< each d -> d

 private:
  /// q, k, v: (B, H, L, d_h); mask: broadcastable to (B, H, L, L) or undefined; p: dropout on
  /// the probabilities. Returns softmax(q k^T * scale + mask) v with dropout: (B, H, L, d_h).
  at::Tensor explicit_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& mask,
                                double p) const;
  /// (B, L, d) -> (B, H, L, d_h)
  at::Tensor split_heads(const at::Tensor& t) const;
};
TORCH_MODULE(SelfAttention);

}  // namespace tupe::model
