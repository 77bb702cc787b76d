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
//
// Sample-keyed masks (so that a run resumed on another world size stays exact with dropout
// on): while a DropoutSampleKeys scope lives on the calling thread, CPU call c (0, 1, ... in
// the order of the forward) of dropout() treats its input, made contiguous, as B equal
// consecutive slices, one per row of the micro-batch (B = the scope's sample count: [B, L, d]
// activations, [B*H, L, L] attention probabilities, [B, d] pooled states), and keys slice b with
//   seed_{c,b} = hash_words({step_key, c, g_b})     (common/mix64.h; g_b = row b's global sample)
// so that a sample's masks depend on the step key, the call and the sample, never on the rank,
// the micro-batch size or the sample's row. Without a scope, one seed per call from the CPU
// generator (above). On CUDA, at::dropout and the fused attention kernels draw from the CUDA
// generator in either case (docs/pretraining.md "Dropout and the world size").
#pragma once
#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include <cstdint>
#include <vector>

namespace tupe::model {

/// RAII: the sample keys of the dropout calls made on this thread while it lives (see the top
/// of this file). Scopes nest (the inner one rules until it ends). Not copyable.
class DropoutSampleKeys {
 public:
  /// `step_key`: the step's key (trainer::sample_dropout_key); `sample_ids`: (B) the global
  /// sample index of each row of the micro-batch, in row order. Throws tupe::Error when empty.
  DropoutSampleKeys(uint64_t step_key, std::vector<int64_t> sample_ids);
  ~DropoutSampleKeys();
  DropoutSampleKeys(const DropoutSampleKeys&) = delete;
  DropoutSampleKeys& operator=(const DropoutSampleKeys&) = delete;

  /// The scope that rules on this thread, or null.
  static DropoutSampleKeys* current();
  /// The seeds of the next call's B slices, seed_{c,b} above; advances c.
  std::vector<uint64_t> next_call_seeds();
  int64_t rows() const { return static_cast<int64_t>(samples_.size()); }

 private:
  uint64_t step_key_;
  std::vector<int64_t> samples_;
  int64_t calls_ = 0;
  DropoutSampleKeys* outer_;
};

/// Inverted dropout of `x` (any shape; float, double, bfloat16 or half) with drop
/// probability p in [0, 1). Identity when !training or p == 0. Differentiable: the gradient
/// is g * m / (1 - p) with the same mask. Throws tupe::Error for p outside [0, 1), and, under
/// a DropoutSampleKeys scope, for a CPU input whose size the scope's rows do not divide.
at::Tensor dropout(const at::Tensor& x, double p, bool training);

/// The CPU path's keep-mask for `numel` elements and `seed`: (numel) uint8, 1 = kept.
/// Exposed for tests (statistics, determinism).
at::Tensor dropout_keep_mask(int64_t numel, double p, uint64_t seed);

/// The keyed CPU path's keep-mask: (numel) uint8, slice b = elements [b * numel / B,
/// (b + 1) * numel / B) drawn as dropout_keep_mask(numel / B, p, row_seeds[b]), B =
/// row_seeds.size(). Throws tupe::Error when B is 0 or does not divide numel.
at::Tensor dropout_keep_mask_rows(int64_t numel, double p, const std::vector<uint64_t>& row_seeds);

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
