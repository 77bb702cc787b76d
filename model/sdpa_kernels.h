// The kernel plumbing of scaled-dot-product attention (model/attention.h calls SDPA through
// these rules): which kernels may serve, the FA3/FA4 switches of torch's flash backend, the
// cuDNN rule of training forwards, and what SDPA would choose.
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
#include <string>

namespace tupe::model {

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

/// RAII: cuDNN attention off for one SDPA call when it was on (the cuDNN rule above).
class CudnnSdpaOff {
 public:
  CudnnSdpaOff();
  ~CudnnSdpaOff();
  CudnnSdpaOff(const CudnnSdpaOff&) = delete;
  CudnnSdpaOff& operator=(const CudnnSdpaOff&) = delete;

 private:
  bool was_on_;
};

}  // namespace tupe::model
