#include "model/attention.h"

#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <ATen/SDPBackend.h>
#include <ATen/autocast_mode.h>
#include <torch/nn/init.h>

#include "common/error.h"

#include "model/dropout.h"
#include "model/linear.h"

namespace tupe::model {

at::ScalarType attention_compute_dtype(const at::Tensor& like) {
  const c10::DeviceType dev = like.device().type();
  if (at::autocast::is_autocast_available(dev) && at::autocast::is_autocast_enabled(dev) &&
      at::autocast::is_eligible(like, dev))
    return at::autocast::get_autocast_dtype(dev);
  return like.scalar_type();
}

std::string to_string(SdpaKernel k) {
  switch (k) {
    case SdpaKernel::kMath: return "math";
    case SdpaKernel::kFlash: return "flash";
    case SdpaKernel::kEfficient: return "efficient";
    case SdpaKernel::kCudnn: return "cudnn";
  }
  return "?";
}

SdpaKernel parse_sdpa_kernel(const std::string& text) {
  for (SdpaKernel k : {SdpaKernel::kMath, SdpaKernel::kFlash, SdpaKernel::kEfficient, SdpaKernel::kCudnn})
    if (text == to_string(k)) return k;
  TUPE_FAIL("SDPA kernel: '" << text << "' is not one of math, flash, efficient, cudnn");
}

namespace {

// The FA3 / FA4 switches exist in some torch versions only (FA3 from 2.11, FA4 from 2.15):
// reached through these templates, whose `requires` checks compile either way.
template <class Ctx>
bool fa3_get(const Ctx& c) {
  if constexpr (requires { c.userEnabledFA3SDP(); })
    return c.userEnabledFA3SDP();
  else
    return false;
}
template <class Ctx>
bool fa3_set(Ctx& c, bool on) {
  if constexpr (requires { c.setSDPUseFA3(on); }) {
    c.setSDPUseFA3(on);
    return true;
  } else {
    return false;
  }
}
template <class Ctx>
bool fa4_get(const Ctx& c) {
  if constexpr (requires { c.userEnabledFA4SDP(); })
    return c.userEnabledFA4SDP();
  else
    return false;
}
template <class Ctx>
bool fa4_set(Ctx& c, bool on) {
  if constexpr (requires { c.setSDPUseFA4(on); }) {
    c.setSDPUseFA4(on);
    return true;
  } else {
    return false;
  }
}
template <class Ctx>
constexpr bool has_fa3() {
  return requires(Ctx& c) { c.setSDPUseFA3(true); };
}
template <class Ctx>
constexpr bool has_fa4() {
  return requires(Ctx& c) { c.setSDPUseFA4(true); };
}

}  // namespace

bool sdpa_has_fa3_switch() { return has_fa3<at::Context>(); }
bool sdpa_has_fa4_switch() { return has_fa4<at::Context>(); }
bool sdpa_fa3_enabled() { return fa3_get(at::globalContext()); }
bool sdpa_fa4_enabled() { return fa4_get(at::globalContext()); }
bool set_sdpa_fa3(bool on) { return fa3_set(at::globalContext(), on); }
bool set_sdpa_fa4(bool on) { return fa4_set(at::globalContext(), on); }

SdpaKernelPin::SdpaKernelPin(SdpaKernel kernel) {
  at::Context& ctx = at::globalContext();
  flash_ = ctx.userEnabledFlashSDP();
  efficient_ = ctx.userEnabledMemEfficientSDP();
  cudnn_ = ctx.userEnabledCuDNNSDP();
  math_ = ctx.userEnabledMathSDP();
  fa3_ = fa3_get(ctx);
  fa4_ = fa4_get(ctx);
  ctx.setSDPUseFlash(kernel == SdpaKernel::kFlash);
  ctx.setSDPUseMemEfficient(kernel == SdpaKernel::kEfficient);
  ctx.setSDPUseCuDNN(kernel == SdpaKernel::kCudnn);
  ctx.setSDPUseMath(kernel == SdpaKernel::kMath);
  fa3_set(ctx, false);  // flash pinned = torch's own flash kernel, not FA3 / FA4
  fa4_set(ctx, false);
}

SdpaKernelPin::~SdpaKernelPin() {
  at::Context& ctx = at::globalContext();
  ctx.setSDPUseFlash(flash_);
  ctx.setSDPUseMemEfficient(efficient_);
  ctx.setSDPUseCuDNN(cudnn_);
  ctx.setSDPUseMath(math_);
  fa3_set(ctx, fa3_);
  fa4_set(ctx, fa4_);
}

bool cudnn_sdpa_avoided(const at::Tensor& q, const at::Tensor& mask, bool avoid_cudnn_in_training) {
  if (!mask.defined() || !at::GradMode::is_enabled()) return false;
  return mask.requires_grad() || (avoid_cudnn_in_training && q.requires_grad());
}

std::string sdpa_choice(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& mask,
                        double dropout_p, double scale) {
  int64_t choice = -1;
  try {
    choice = at::_fused_sdp_choice(q, k, v, mask.defined() ? std::optional<at::Tensor>(mask) : std::nullopt,
                                   dropout_p, /*is_causal=*/false, scale);
  } catch (const c10::Error&) {
    return "none";  // no kernel is allowed that can serve these arguments
  }
  switch (static_cast<at::SDPBackend>(choice)) {
    case at::SDPBackend::math: return "math";
    case at::SDPBackend::flash_attention: return "flash_attention";
    case at::SDPBackend::efficient_attention: return "efficient_attention";
    case at::SDPBackend::cudnn_attention: return "cudnn_attention";
    case at::SDPBackend::overrideable: return "overrideable";
    default: return "none";
  }
}

namespace {

/// RAII: cuDNN attention off for one SDPA call, when it was on (see the top of attention.h).
class CudnnSdpaOff {
 public:
  CudnnSdpaOff() : was_on_(at::globalContext().userEnabledCuDNNSDP()) {
    if (was_on_) at::globalContext().setSDPUseCuDNN(false);
  }
  ~CudnnSdpaOff() {
    if (was_on_) at::globalContext().setSDPUseCuDNN(true);
  }
  CudnnSdpaOff(const CudnnSdpaOff&) = delete;
  CudnnSdpaOff& operator=(const CudnnSdpaOff&) = delete;

 private:
  bool was_on_;
};

}  // namespace

std::string training_sdpa_choice(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                 const at::Tensor& mask, double dropout_p, double scale, bool avoid) {
  if (!cudnn_sdpa_avoided(q, mask, avoid)) return sdpa_choice(q, k, v, mask, dropout_p, scale);
  const CudnnSdpaOff no_cudnn;
  return sdpa_choice(q, k, v, mask, dropout_p, scale);
}

SelfAttentionImpl::SelfAttentionImpl(const ModelOptions& c) : config(c) {
  const int64_t d = c.hidden_size;
  query = register_module("query", torch::nn::Linear(d, d));
  key = register_module("key", torch::nn::Linear(d, d));
  value = register_module("value", torch::nn::Linear(d, d));
  output = register_module("output", torch::nn::Linear(d, d));
  reset_parameters();
}

void SelfAttentionImpl::reset_parameters() {
  torch::NoGradGuard no_grad;
  for (auto& lin : {query, key, value, output}) {
    torch::nn::init::normal_(lin->weight, 0.0, config.init_std);
    torch::nn::init::zeros_(lin->bias);
  }
}

std::array<at::Tensor, 3> SelfAttentionImpl::project_qkv(const at::Tensor& x) const {
  const int64_t B = x.size(0), L = x.size(1);
  // (3d, d) and (3d): rows [0, d) = W^Q, [d, 2d) = W^K, [2d, 3d) = W^V. at::cat is a
  // "promote" op for autocast (fp32 weights stay fp32); at::linear then casts x and the
  // fused weight once. Backward of cat hands each Linear its (d, d) block of the gradient.
  const at::Tensor w = at::cat({query->weight, key->weight, value->weight});
  const at::Tensor b = at::cat({query->bias, key->bias, value->bias});
  // (B, L, 3d) viewed as (B, L, 3, H, d_h); unbind(2) gives three (B, L, H, d_h) views, each
  // transposed to (B, H, L, d_h). unbind's backward stacks the three head-major gradients
  // straight into one contiguous (B, L, 3, H, d_h) = (B, L, 3d) buffer for the linear's
  // backward GEMMs: one copy, as the per-projection reshapes made before (no extra concat).
  const std::vector<at::Tensor> qkv =
      at::linear(x, w, b).view({B, L, 3, config.num_heads, config.head_size()}).unbind(2);
  return {qkv[0].transpose(1, 2), qkv[1].transpose(1, 2), qkv[2].transpose(1, 2)};
}

std::array<at::Tensor, 3> SelfAttentionImpl::project_qkv(const at::Tensor& x, const at::Tensor& pos_q,
                                                         const at::Tensor& pos_k) const {
  auto qkv = project_qkv(x);
  // BERT-A^d: (x W^Q + b^Q + pq)(x W^K + b^K + pk)^T expands into its four terms. A no-op
  // cast when the encoder passed them in the compute dtype.
  if (pos_q.defined()) qkv[0] = qkv[0] + pos_q.to(qkv[0].scalar_type());
  if (pos_k.defined()) qkv[1] = qkv[1] + pos_k.to(qkv[1].scalar_type());
  return qkv;
}

at::Tensor SelfAttentionImpl::forward(const at::Tensor& x, const at::Tensor& bias, const at::Tensor& pos_q,
                                      const at::Tensor& pos_k) {
  const int64_t B = x.size(0), L = x.size(1);
  const auto [q, k, v] = project_qkv(x, pos_q, pos_k);
  const double p = is_training() ? config.attention_dropout : 0.0;
  // SDPA wants the mask in the query's dtype. Encoder passes it already in the compute
  // dtype (cast once per forward for all layers): then this is a no-op, no graph node.
  at::Tensor mask = bias.defined() ? bias.to(q.scalar_type()) : bias;
  at::Tensor ctx;  // (B, H, L, d_h)
  // No mask (BERT-A without padding) is SDPA's nullopt: an undefined tensor would be a mask of no dtype.
  const std::optional<at::Tensor> sdpa_mask = mask.defined() ? std::optional<at::Tensor>(mask) : std::nullopt;
  if (x.device().is_cpu() && is_training() && (p > 0.0 || (mask.defined() && mask.requires_grad()))) {
    ctx = explicit_attention(q, k, v, mask, p);
  } else if (x.is_cuda() && cudnn_sdpa_avoided(q, mask, avoid_cudnn_in_training)) {
    const CudnnSdpaOff no_cudnn;
    ctx = at::scaled_dot_product_attention(q, k, v, sdpa_mask, p, /*is_causal=*/false, config.attention_scale());
  } else {
    ctx = at::scaled_dot_product_attention(q, k, v, sdpa_mask, p, /*is_causal=*/false, config.attention_scale());
  }
  return linear(output, ctx.transpose(1, 2).reshape({B, L, config.hidden_size}));
}

at::Tensor SelfAttentionImpl::explicit_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                                 const at::Tensor& mask, double p) const {
  const int64_t B = q.size(0), H = q.size(1), L = q.size(2), dh = q.size(3);
  const at::Tensor q3 = q.reshape({B * H, L, dh}), k3 = k.reshape({B * H, L, dh}), v3 = v.reshape({B * H, L, dh});
  at::Tensor scores;  // (B*H, L, L) = mask + scale * q k^T in one GEMM (beta = 1, alpha = scale)
  if (mask.defined()) {
    // (B, H, Lq, L) with Lq = L or 1: a view for TUPE's full bias; BERT-A's (B, 1, 1, L)
    // padding mask becomes (B*H, 1, L), which baddbmm broadcasts over the query rows.
    const int64_t Lq = mask.size(-2);
    const at::Tensor mask3 = mask.expand({B, H, Lq, L}).reshape({B * H, Lq, L});
    scores = at::baddbmm(mask3, q3, k3.transpose(1, 2), /*beta=*/1.0, /*alpha=*/config.attention_scale());
  } else {
    scores = at::bmm(q3, k3.transpose(1, 2)).mul_(config.attention_scale());
  }
  const at::Tensor probs = model::dropout(at::softmax(scores, -1), p, /*training=*/true);
  return at::bmm(probs, v3).view({B, H, L, dh});
}

at::Tensor SelfAttentionImpl::logits(const at::Tensor& x, const at::Tensor& bias, const at::Tensor& pos_q,
                                     const at::Tensor& pos_k) {
  const auto [q, k, v] = project_qkv(x, pos_q, pos_k);  // the forward's projection (v unused here)
  at::Tensor s = at::matmul(q, k.transpose(-2, -1)) * config.attention_scale();
  return bias.defined() ? s + bias : s;
}

}  // namespace tupe::model
