// The optimizer step of trainer/train_step.h (both jobs' step), after the last micro-step's
// backward and the gradient sync.
// With g the synchronised gradients of the loss-scaled SUMMED loss as ONE flat tensor (DDP's
// gradient buffer), C the global batch's count (the sum over ranks of the local counts, a
// device tensor), S the loss scale and t the optimizer step (1-based):
//   N_s = ||g||_2, accumulated in fp32 (fp64 for fp64 gradients)
//   N = N_s / (S C), the norm of the gradient of the global MEAN loss
//   found_inf = !isfinite(N): inf/NaN exactly when some gradient is, when the sum of
//         squares overflows (taken as an overflow too), or when C = 0 (nothing to learn
//         from: 0/0; the step is skipped and counted like an overflow)
//   g <- g * (c / (S C)),  c = max_norm / (N + 1e-6) if max_norm > 0 and N > max_norm, else 1
//         (torch.nn.utils.clip_grad_norm_'s rule; one multiply normalises, unscales and clips)
//   optimizer.step(lr(t), found_inf)    the update is skipped ON THE DEVICE when found_inf
//   scaler.update(found_inf)            S and the skip counters, on the device
// Rule for skipped steps (both loops): the LR schedule counts optimizer steps, applied or
// skipped: step t uses lr(t) whatever happened before (as torch.amp users who call
// scheduler.step() every iteration); a skipped step's LR is not made up later.
// Host syncs: none, on the CPU too. The result's tensors stay on the device; the job reads
// them on log steps only.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>

#include "trainer/loss_scaler.h"
#include "trainer/lr_schedule.h"
#include "trainer/optimizer.h"

namespace tupe::trainer {

/// What one training step found (device tensors; reading them is a host sync). The one
/// result type of a step: OptimizerStep::apply fills all but loss_sum, TrainStep::run all.
struct StepResult {
  at::Tensor loss_sum;   ///< 0-dim fp32: this rank's summed loss over its micro-batches (TrainStep)
  at::Tensor count;      ///< (1,) float64: C, the global batch's count (the mean loss is sum of loss_sum / C)
  at::Tensor
      grad_norm;  ///< 0-dim fp32 (fp64 for fp64 gradients): N, the mean loss's pre-clip norm (inf/NaN when skipped)
  at::Tensor found_inf;  ///< (1,) fp32: 1 when the step was skipped
  double lr = 0;         ///< lr(t), the LR the step used (or would have used)
};

class OptimizerStep {
 public:
  /// The three must outlive this object. max_norm <= 0: no clipping.
  OptimizerStep(Optimizer& optimizer, DynamicLossScaler& scaler, const LrSchedule& schedule, double max_norm);

  /// Runs step t = `step` (>= 1) on `flat_grads` (every parameter's grad as views of this
  /// one contiguous float tensor, on the parameters' device), the gradients of the summed
  /// loss, divided here by `global_count` (C: a 1-element float64 tensor on that device).
  /// Throws tupe::Error for step < 1, a flat_grads that is undefined or not floating point,
  /// or a global_count that is not one float64 element on the gradients' device.
  StepResult apply(const at::Tensor& flat_grads, int64_t step, const at::Tensor& global_count);

 private:
  Optimizer& optimizer_;
  DynamicLossScaler& scaler_;
  const LrSchedule& schedule_;
  const double max_norm_;
};

}  // namespace tupe::trainer
