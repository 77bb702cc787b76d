#include "trainer/optimizer_step.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include "common/error.h"

namespace tupe::trainer {

OptimizerStep::OptimizerStep(Optimizer& optimizer, DynamicLossScaler& scaler, const LrSchedule& schedule,
                             double max_norm)
    : optimizer_(optimizer), scaler_(scaler), schedule_(schedule), max_norm_(max_norm) {}

StepResult OptimizerStep::apply(const at::Tensor& flat_grads, int64_t step) {
  TUPE_CHECK(step >= 1, "optimizer step: step must be >= 1, got " << step);
  TUPE_CHECK(flat_grads.defined() && at::isFloatingType(flat_grads.scalar_type()),
             "optimizer step: the flat gradient buffer must be a defined floating-point tensor");
  c10::NoGradGuard no_grad;
  StepResult out;
  out.lr = schedule_.lr(step);
  // The norm accumulates in float32 for half/bfloat16/float32 gradients, in float64 for float64 ones.
  const at::ScalarType norm_dtype = flat_grads.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  const at::Tensor scaled_norm = at::linalg_vector_norm(flat_grads, 2, {}, false, norm_dtype);  // N_s
  out.found_inf = at::logical_not(at::isfinite(scaled_norm)).to(at::kFloat).reshape({1});
  const at::Tensor inv_scale = at::reciprocal(scaler_.scale_tensor().squeeze(0));  // 1 / S
  out.grad_norm = scaled_norm * inv_scale;                                        // N
  at::Tensor factor = inv_scale;                                                   // c / S
  if (max_norm_ > 0) {
    const at::Tensor clip = at::clamp_max(max_norm_ / (out.grad_norm + 1e-6), 1.0);  // c (N <= max: c >= 1 -> 1)
    factor = at::where(out.grad_norm > max_norm_, clip, at::ones_like(clip)) * inv_scale;
  }
  // One multiply unscales and clips (left out when it is exactly 1: S = 1 and no clipping).
  // On a skipped step the grads hold inf/NaN anyway and are zeroed before the next one.
  if (scaler_.scaling_enabled() || max_norm_ > 0) flat_grads.mul_(factor);
  optimizer_.step(out.lr, out.found_inf);
  scaler_.update(out.found_inf);
  return out;
}

}  // namespace tupe::trainer
