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
//   BERT-A^d only: q += pq, k += pk   with pq, pk (1, H, L, d_h) the shared projected positions
//             (model/positional.h query_key), so that q k^T holds all four word/position terms
//   logits = q k^T * scale + bias       scale = 1/sqrt(d_h) (BERT), 1/sqrt(2 d_h) (TUPE Eq. 10),
//                                               1/sqrt(4 d_h) (BERT-A^d)
//   out = (softmax(logits) v) W^O + b^O                          (B, L, d)
//
// Which SDPA kernel a CUDA training forward gets. torch does not rule cuDNN attention out for
// a bias that needs a gradient: its can_use_cudnn_attention checks only the mask's shape,
// torch 2.11+ prefers cuDNN on H100/H200 (cuDNN >= 9.9), and cuDNN's backward returns no
// gradient for attn_bias, so TUPE-A, BERT-R and TUPE-R would fail with "not differentiable
// with respect to argument 'attn_bias'". And BERT-A's (B, 1, 1, L) padding mask, which needs
// no gradient, would get a cuDNN backward that returns NaN in dQ when L % 128 == 64 and a
// query row's logsumexp is below about -88.7 (upstream bug pytorch/pytorch#196678, cuDNN
// with an explicit mask). So a CUDA forward that needs gradients and has a mask runs with
// cuDNN attention switched off when the mask needs a gradient (always) or when
// avoid_cudnn_in_training is on (default): cudnn_sdpa_avoided() is the rule. TUPE's bias then
// runs the memory-efficient kernel (flash attention takes no mask at all), and BERT-A trains on it too, which also makes their step
// times comparable. Inference and CPU are left to torch's own choice.
// tests/gpu/test_cuda_model.cpp checks the kernel and the NaN-prone lengths on the GPU.
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

/// torch's SDPA kernels that can be allowed or not (at::globalContext()'s SDP flags).
enum class SdpaKernel { kMath, kFlash, kEfficient, kCudnn };
/// "math", "flash", "efficient", "cudnn".
std::string to_string(SdpaKernel k);
/// Throws tupe::Error naming the word for anything but the four names above.
SdpaKernel parse_sdpa_kernel(const std::string& text);

/// RAII: allows only `kernel` among flash / memory-efficient / cuDNN / math SDPA (so a call
/// it cannot serve fails loudly instead of falling back), restoring the previous flags at
/// scope exit. The flash backend's FA3 and FA4 kernels (at::Context's setSDPUseFA3 /
/// setSDPUseFA4, where this torch has them: FA3 since 2.11, FA4 in 2.15) are switched off
/// too, so a pin to flash runs torch's own flash kernel. The flags are process-wide: hold
/// it around whole steps on the thread that runs the model, not while other threads run SDPA.
class SdpaKernelPin {
 public:
  explicit SdpaKernelPin(SdpaKernel kernel);
  ~SdpaKernelPin();
  SdpaKernelPin(const SdpaKernelPin&) = delete;
  SdpaKernelPin& operator=(const SdpaKernelPin&) = delete;

 private:
  bool flash_, efficient_, cudnn_, math_, fa3_, fa4_;
};

/// Whether this torch has the FA3 / FA4 switches of the flash backend (at::Context).
bool sdpa_has_fa3_switch();
bool sdpa_has_fa4_switch();
/// The FA3 / FA4 switches as they are now (false where this torch has none).
bool sdpa_fa3_enabled();
bool sdpa_fa4_enabled();
/// Sets the FA3 / FA4 switch; returns false (and changes nothing) where this torch has none.
bool set_sdpa_fa3(bool on);
bool set_sdpa_fa4(bool on);

/// The cuDNN rule of a SelfAttention training forward (top of this file): true when the
/// call runs with cuDNN attention switched off, i.e. grad mode is on, `mask` is defined, and
/// either the mask requires grad (cuDNN's backward gives it no gradient) or
/// `avoid_cudnn_in_training` is set and q requires grad. q, mask: SDPA's query and mask.
/// Device-independent (the forward applies it to CUDA calls only).
bool cudnn_sdpa_avoided(const at::Tensor& q, const at::Tensor& mask, bool avoid_cudnn_in_training);

/// The kernel SDPA would run for these arguments under the current flags
/// (at::_fused_sdp_choice): "math", "flash_attention", "efficient_attention",
/// "cudnn_attention", "overrideable", or "none" when no kernel can serve them.
std::string sdpa_choice(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& mask,
                        double dropout_p, double scale);
/// The kernel a SelfAttention forward with avoid_cudnn_in_training = `avoid` picks for these
/// SDPA arguments under the current flags: sdpa_choice() with cuDNN switched off where
/// cudnn_sdpa_avoided() says so (on any device; CPU training takes explicit_attention).
std::string training_sdpa_choice(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                 const at::Tensor& mask, double dropout_p, double scale, bool avoid);

class SelfAttentionImpl : public torch::nn::Module {
 public:
  explicit SelfAttentionImpl(const ModelOptions& config);
  void reset_parameters();

  /// x: (B, L, d); bias: additive, broadcastable to (B, H, L, L) (positional term plus
  /// -inf at padded keys), or undefined; best given already in attention_compute_dtype(x)
  /// (Encoder casts it once for all layers; another dtype is cast here). Returns (B, L, d).
  /// Dropout on the attention probabilities in training mode.
  /// pos_q, pos_k: BERT-A^d's projected positions, broadcastable to (B, H, L, d_h) and best in
  /// attention_compute_dtype(x) (Encoder casts them once), added to q and k before SDPA; or
  /// undefined (every other variant).
  at::Tensor forward(const at::Tensor& x, const at::Tensor& bias, const at::Tensor& pos_q = {},
                     const at::Tensor& pos_k = {});

  /// The pre-softmax logits (q + pos_q)(k + pos_k)^T * scale + bias: (B, H, L, L). For tests
  /// and analysis.
  at::Tensor logits(const at::Tensor& x, const at::Tensor& bias, const at::Tensor& pos_q = {},
                    const at::Tensor& pos_k = {});

  ModelOptions config;
  /// On (default): a CUDA forward that needs gradients and has a mask runs with cuDNN
  /// attention switched off (see the top of this file). Off: torch's own choice (the
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
  /// project_qkv, then pos_q / pos_k (where defined, cast to q's dtype) added to q and k.
  std::array<at::Tensor, 3> project_qkv(const at::Tensor& x, const at::Tensor& pos_q, const at::Tensor& pos_k) const;
  /// q, k, v: (B, H, L, d_h); mask: broadcastable to (B, H, L, L) or undefined; p: dropout on
  /// the probabilities. Returns softmax(q k^T * scale + mask) v with dropout: (B, H, L, d_h).
  at::Tensor explicit_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& mask,
                                double p) const;
};
TORCH_MODULE(SelfAttention);

}  // namespace tupe::model
