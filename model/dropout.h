// Inverted dropout (Srivastava et al. 2014), with a fast CPU path.
//
//   y = x * m / (1 - p),   m ~ Bernoulli(1 - p) per element, drawn in training mode only.
//
// On CUDA (and for p = 0, or outside training) this is at::dropout. On the CPU, at::dropout
// draws one 64-bit random number per element through the CPU generator's virtual call and
// keeps a float noise tensor for backward: about 8% of a CPU pre-training step (bench/
// RESULTS.md). The CPU path here draws ONE 64-bit seed from the default CPU generator per
// call (so at::manual_seed makes it reproducible, as at::dropout is) and derives element
// i's uniform 32-bit number as a counter-based hash of (seed, i) (MurmurHash3's 32-bit
// finaliser over a Weyl sequence), vectorised and threaded; it keeps a 1-byte mask. Element
// i is kept when u_i >= round(p * 2^32), i.e. with probability 1 - p to within 2^-32.
#pragma once
#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

namespace tupe::model {

/// Inverted dropout of `x` (any shape; float, double, bfloat16 or half) with drop
/// probability p in [0, 1). Identity when !training or p == 0. Differentiable: the gradient
/// is g * m / (1 - p) with the same mask. Throws tupe::Error for p outside [0, 1).
at::Tensor dropout(const at::Tensor& x, double p, bool training);

/// The CPU path's keep-mask for `numel` elements and `seed`: (numel) uint8, 1 = kept.
/// Exposed for tests (statistics, determinism).
at::Tensor dropout_keep_mask(int64_t numel, double p, uint64_t seed);

/// Module form of dropout() (no parameters), for use as a registered submodule.
class DropoutImpl : public torch::nn::Module {
 public:
  /// p: drop probability in [0, 1).
  explicit DropoutImpl(double p);
  /// x: any shape. In training mode drops with probability p; identity in eval mode.
  at::Tensor forward(const at::Tensor& x);
  double p;
};
TORCH_MODULE(Dropout);

}  // namespace tupe::model
