#include "model/sdpa_kernels.h"

#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <ATen/SDPBackend.h>

#include "common/error.h"

namespace tupe::model {

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

CudnnSdpaOff::CudnnSdpaOff() : was_on_(at::globalContext().userEnabledCuDNNSDP()) {
  if (was_on_) at::globalContext().setSDPUseCuDNN(false);
}

CudnnSdpaOff::~CudnnSdpaOff() {
  if (was_on_) at::globalContext().setSDPUseCuDNN(true);
}

std::string training_sdpa_choice(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                 const at::Tensor& mask, double dropout_p, double scale, bool avoid) {
  if (!cudnn_sdpa_avoided(q, mask, avoid)) return sdpa_choice(q, k, v, mask, dropout_p, scale);
  const CudnnSdpaOff no_cudnn;
  return sdpa_choice(q, k, v, mask, dropout_p, scale);
}

}  // namespace tupe::model
