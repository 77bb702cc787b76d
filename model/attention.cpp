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

SdpaKernelPin::SdpaKernelPin(SdpaKernel kernel) {
  at::Context& ctx = at::globalContext();
  flash_ = ctx.userEnabledFlashSDP();
  efficient_ = ctx.userEnabledMemEfficientSDP();
  cudnn_ = ctx.userEnabledCuDNNSDP();
  math_ = ctx.userEnabledMathSDP();
  ctx.setSDPUseFlash(kernel == SdpaKernel::kFlash);
  ctx.setSDPUseMemEfficient(kernel == SdpaKernel::kEfficient);
  ctx.setSDPUseCuDNN(kernel == SdpaKernel::kCudnn);
  ctx.setSDPUseMath(kernel == SdpaKernel::kMath);
}

SdpaKernelPin::~SdpaKernelPin() {
  at::Context& ctx = at::globalContext();
  ctx.setSDPUseFlash(flash_);
  ctx.setSDPUseMemEfficient(efficient_);
  ctx.setSDPUseCuDNN(cudnn_);
  ctx.setSDPUseMath(math_);
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

at::Tensor SelfAttentionImpl::forward(const at::Tensor& x, const at::Tensor& bias) {
  const int64_t B = x.size(0), L = x.size(1);
  const auto [q, k, v] = project_qkv(x);
  const double p = is_training() ? config.attention_dropout : 0.0;
  // SDPA wants the mask in the query's dtype. Encoder passes it already in the compute
  // dtype (cast once per forward for all layers): then this is a no-op, no graph node.
  at::Tensor mask = bias.defined() ? bias.to(q.scalar_type()) : bias;
  at::Tensor ctx;  // (B, H, L, d_h)
  if (x.device().is_cpu() && is_training() && (p > 0.0 || (mask.defined() && mask.requires_grad()))) {
    ctx = explicit_attention(q, k, v, mask, p);
  } else if (x.is_cuda() && avoid_cudnn_in_training && mask.defined() && at::GradMode::is_enabled() &&
             (q.requires_grad() || mask.requires_grad())) {
    const CudnnSdpaOff no_cudnn;
    ctx = at::scaled_dot_product_attention(q, k, v, mask, p, /*is_causal=*/false, /*scale=*/config.attention_scale());
  } else {
    ctx = at::scaled_dot_product_attention(q, k, v, mask, p, /*is_causal=*/false, /*scale=*/config.attention_scale());
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

at::Tensor SelfAttentionImpl::logits(const at::Tensor& x, const at::Tensor& bias) {
  const auto [q, k, v] = project_qkv(x);  // the forward's projection (v unused here)
  at::Tensor s = at::matmul(q, k.transpose(-2, -1)) * config.attention_scale();
  return bias.defined() ? s + bias : s;
}

}  // namespace tupe::model
