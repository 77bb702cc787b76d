// Dynamic loss scaling for fp16 training (Micikevicius et al. 2018; the rules of
// torch.amp.GradScaler / fairseq's DynamicLossScaler):
//   - the loss is multiplied by S before backward; after the gradient all-reduce one pass
//     over the grads gives their global norm, which is inf/NaN exactly when some grad is;
//     the grads are then unscaled and clipped with one multiply (unscale_clip_and_check);
//   - a step with inf/NaN grads is skipped: S <- S * backoff_factor, the growth tracker
//     resets, the consecutive-skip count grows; after max_consecutive_skips consecutive
//     skips the run aborts with a tupe::Error naming the step and the count;
//   - after growth_interval consecutive finite steps: S <- S * growth_factor.
// With bf16/fp32 (no scaling) S stays 1, but inf/NaN steps are still skipped and counted.
#pragma once
#include <cstdint>
#include <vector>

#include "trainer/named_tensors.h"
#include "trainer/options.h"

namespace tupe::trainer {

/// Checkpointed state of the loss scaler.
struct LossScalerState {
  double scale = 1.0;             ///< S (factor)
  int64_t growth_tracker = 0;     ///< consecutive finite steps since the last scale change
  int64_t consecutive_skips = 0;  ///< consecutive skipped (inf/NaN) steps up to now
  int64_t total_skips = 0;        ///< skipped steps over the run (for reporting)
};

class DynamicLossScaler {
 public:
  /// Scaling is on for precision fp16 only (S starts at initial_scale); otherwise S = 1.
  /// Throws tupe::Error (via validate) on bad options.
  explicit DynamicLossScaler(const PrecisionOptions& options);

  bool scaling_enabled() const { return scaling_enabled_; }
  double scale() const { return state_.scale; }

  /// loss * S (any shape/dtype; differentiable).
  at::Tensor scale_loss(const at::Tensor& loss) const;

  /// What unscale_clip_and_check found.
  struct GradCheck {
    bool finite = true;  ///< every grad finite (else the step must be skipped)
    double norm = 0;     ///< global L2 norm of the UNSCALED grads before clipping; inf/NaN when not finite
  };

  /// The post-backward pass of a step, with ONE read of the grads and ONE host sync:
  ///   N_s = global_grad_norm(grads) (of the scaled grads, fp32 accumulation); N = N_s / S.
  ///   N_s inf/NaN <=> some grad is inf/NaN (or the sum of squares overflows fp32, taken as
  ///   an overflow too): grads untouched, finite = false.
  ///   Otherwise, when S != 1 or max_norm > 0 and N > max_norm, every grad is multiplied in
  ///   place by c / S with c = max_norm / (N + 1e-6) if clipping, else 1 (torch's
  ///   clip_grad_norm_ rule). With S a power of two (the scaler's factors are 2 and 0.5 by
  ///   default) this equals unscaling then clipping bit for bit; grads are left as they
  ///   are when there is nothing to do (bf16/fp32 below the clip threshold).
  /// Grads: float16/bfloat16/float32/float64 on one device. max_norm <= 0: no clipping.
  GradCheck unscale_clip_and_check(const std::vector<at::Tensor>& grads, double max_norm) const;

  /// Records the outcome of optimizer step `step` (for messages) and updates S. Returns
  /// true when the update should be applied, false when it must be skipped. Throws
  /// tupe::Error "loss scaler: step <step>: <k> consecutive steps ..." at the
  /// max_consecutive_skips-th consecutive skip.
  bool update(bool grads_finite, int64_t step);

  const LossScalerState& state() const { return state_; }
  /// Restores a saved state; throws tupe::Error when it is invalid (scale <= 0, counts < 0).
  void load_state(const LossScalerState& state);

 private:
  PrecisionOptions options_;
  bool scaling_enabled_;
  LossScalerState state_;
};

}  // namespace tupe::trainer
