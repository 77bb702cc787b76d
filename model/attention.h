// Multi-head self-attention with an additive logit bias (the positional term plus the
// padding mask). Every attention of the model -- the training and inference forward and the
// logits tests and analysis read -- goes through ONE function, attend() (below): it adds the
// per-layer query/key terms, forms the logits' scale and bias, and picks the kernel in one
// place: at::scaled_dot_product_attention (fused kernels on GPU and in CPU inference; the
// kernel rules are model/sdpa_kernels.h), or, for CPU training with attention dropout or a bias
// that needs a gradient (where CPU SDPA falls back to its unfused math path anyway), the
// explicit path: the bias add and the scale folded into one GEMM (baddbmm), softmax,
// model/dropout.h's dropout, a second GEMM. A new positional scheme (a bias, a rotation of q
// and k) is one change there.
// Shape legend: B batch, L sequence length, d model width, H heads, d_h = d / H.
//   [q | k | v] = x [W^Q; W^K; W^V]^T + [b^Q | b^K | b^V]   ONE GEMM: (B, L, d) -> (B, L, 3d)
//   q, k, v = the three d-wide column blocks: (B, L, 3d) = (B, L, 3, H, d_h), unbind(2),
//             heads to the front                                 each (B, H, L, d_h)
// The fused weight (3d, d) is the row-wise concatenation of the three registered Linear
// weights (torch Linear: W is (out, in)), built in each forward, so the parameters (and the
// checkpoint names ...attention.{query,key,value}.{weight,bias}) stay as they were and
// autograd splits the fused gradient back into them. Under autocast the linear casts x and
// the fused weight once (not three times each).
//   BERT-A^d only: q += pq, k += pk   with pq, pk (1, H, L, d_h) the shared projected positions
//             (model/positional.h query_key), so that q k^T holds all four word/position terms
//   RoPE only: q = q cos + rotate_half(q) sin, k likewise       cos, sin (1, 1, L, d_h)
//             (model/positional.h rotary), rotate_half([x1 | x2]) = [-x2 | x1] over d_h's halves,
//             so feature i and i + d_h/2 of position t turn by the angle t theta_i (RoFormer Eq. 34,
//             in the half-split pairing of GPT-NeoX and ModernBERT: docs/model.md "RoPE")
//   logits = q k^T * scale + bias       scale = 1/sqrt(d_h) (BERT, RoPE, ALiBi, NoPE), 1/sqrt(2 d_h) (TUPE Eq. 10),
//                                               1/sqrt(4 d_h) (BERT-A^d)
//   out = (softmax(logits) v) W^O + b^O                          (B, L, d)
//
#pragma once
#include <ATen/core/Tensor.h>
#include <array>
#include <string>
#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>

#include "model/config.h"

namespace tupe::model {

/// The dtype q, k, v (and so the attention bias) take for a floating tensor `like` on its
/// device: the autocast dtype when autocast is on for that device type and would cast `like`
/// (floating, not float64: ATen's autocast::is_eligible), else like's own dtype.
at::ScalarType attention_compute_dtype(const at::Tensor& like);

/// What every layer's attention gets from the encoder's positions, built once per forward (each
/// best in attention_compute_dtype, or undefined where the variant has none).
struct PositionInputs {
  at::Tensor bias;                ///< additive, broadcastable to (B, H, L, L): positional term + padding
  at::Tensor pos_q, pos_k;        ///< BERT-A^d: broadcastable to (B, H, L, d_h), added to q and k
  at::Tensor rope_cos, rope_sin;  ///< RoPE: broadcastable to (B, H, L, d_h), the rotation of q and k
};

/// One attention call (shape legend above). q, k, v: (B, H, L, d_h) in the compute dtype.
struct AttentionInputs {
  at::Tensor q, k, v;
  PositionInputs pos;   ///< the bias (in q's dtype), BERT-A^d's terms, RoPE's rotation, or undefined
  double scale = 1.0;   ///< of q k^T (ModelOptions::attention_scale)
  double dropout = 0.0; ///< on the probabilities (0 outside training)
};

/// RoPE's rotation of x: x cos + rotate_half(x) sin, rotate_half([x1 | x2]) = [-x2 | x1] over the
/// last dimension's halves. x: (..., L, d_h); cos, sin broadcastable to x. Same shape and dtype.
at::Tensor apply_rotary(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin);

/// softmax(rot(q + pos_q) rot(k + pos_k)^T * scale + bias) v (rot: RoPE's rotation where given), with dropout on the probabilities when
/// `training`: (B, H, L, d_h). The kernel: the explicit path for CPU training with dropout or
/// a bias that needs a gradient, else SDPA, with cuDNN attention off where
/// cudnn_sdpa_avoided(q, bias, avoid_cudnn_in_training) says so on CUDA (sdpa_kernels.h).
at::Tensor attend(AttentionInputs in, bool training, bool avoid_cudnn_in_training);

/// The pre-softmax logits attend() forms: rot(q + pos_q) rot(k + pos_k)^T * scale + bias, (B, H, L, L).
at::Tensor attention_logits(AttentionInputs in);

/// The kernel attend() runs for a model of `config` with `batch` rows of `length` tokens on
/// `device` in `dtype` (the compute dtype: autocast's, or the weights'), in a training forward
/// (q needs a gradient, the config's attention dropout) or an evaluation one (no gradient, no
/// dropout), under the current SDPA flags: "explicit (CPU training path)", or the SDPA kernel
/// (sdpa_kernels.h's sdpa_choice / training_sdpa_choice: "math", "flash_attention",
/// "efficient_attention", "cudnn_attention", ...). The mask is the one the model forms: a
/// (B, H, L, L) bias needing a gradient in training where the encoding has a positional logit
/// term, else BERT-A's (B, 1, 1, L) padding mask. Runs SDPA's selection only, no attention.
std::string attention_kernel(const ModelOptions& config, int64_t batch, int64_t length, const c10::Device& device,
                             at::ScalarType dtype, bool training, bool avoid_cudnn_in_training);

class SelfAttentionImpl : public torch::nn::Module {
 public:
  explicit SelfAttentionImpl(const ModelOptions& config);
  void reset_parameters();

  /// x: (B, L, d); positions: the encoder's PositionInputs (bias: positional term plus -inf at
  /// padded keys; BERT-A^d's pos_q, pos_k; RoPE's cos, sin), best given already in
  /// attention_compute_dtype(x) (Encoder casts them once for all layers; another dtype is cast
  /// here). Returns (B, L, d). Dropout on the attention probabilities in training mode.
  at::Tensor forward(const at::Tensor& x, const PositionInputs& positions);
  /// forward(x, {bias}): a bias (or undefined) and no other positional input.
  at::Tensor forward(const at::Tensor& x, const at::Tensor& bias);

  /// The pre-softmax logits rot(q + pos_q) rot(k + pos_k)^T * scale + bias: (B, H, L, L). For
  /// tests and analysis.
  at::Tensor logits(const at::Tensor& x, const PositionInputs& positions);
  at::Tensor logits(const at::Tensor& x, const at::Tensor& bias);

  ModelOptions config;
  /// On (default): a CUDA forward that needs gradients and has a mask runs with cuDNN
  /// attention switched off (model/sdpa_kernels.h). Off: torch's own choice (the
  /// benchmarks' "default" figures), except for a mask that needs a gradient, which never
  /// runs on cuDNN (cudnn_sdpa_avoided()).
  bool avoid_cudnn_in_training = true;
  /// Each d -> d. query/key/value hold W^Q, W^K, W^V and their biases (checkpoint names);
  /// forward applies them fused (project_qkv), never through their own forward.
  torch::nn::Linear query{nullptr}, key{nullptr}, value{nullptr}, output{nullptr};

 private:
  /// x: (B, L, d) -> {q, k, v}, each (B, H, L, d_h) in x's (autocast) compute dtype: one
  /// linear with the fused (3d, d) weight and (3d) bias, then three strided views of it.
  std::array<at::Tensor, 3> project_qkv(const at::Tensor& x) const;
  /// The attend() inputs of x: its q, k, v, the bias (cast to q's dtype: a no-op when the
  /// encoder cast it once), BERT-A^d's terms, RoPE's rotation, the variant's scale and, in
  /// training, its dropout.
  AttentionInputs inputs(const at::Tensor& x, const PositionInputs& positions) const;
};
TORCH_MODULE(SelfAttention);

}  // namespace tupe::model
