#include "trainer/optimizer_step.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include "common/error.h"

namespace tupe::trainer {

OptimizerStep::OptimizerStep(Optimizer& optimizer, DynamicLossScaler& scaler, const LrSchedule& schedule,
                             double max_norm)
    : optimizer_(optimizer), scaler_(scaler), schedule_(schedule), max_norm_(max_norm) {}

StepResult OptimizerStep::apply(const at::Tensor& flat_grads, int64_t step, const at::Tensor& global_count) {
  TUPE_CHECK(step >= 1, "optimizer step: step must be >= 1, got " << step);
  TUPE_CHECK(flat_grads.defined() && at::isFloatingType(flat_grads.scalar_type()),
             "optimizer step: the flat gradient buffer must be a defined floating-point tensor");
  TUPE_CHECK(global_count.defined() && global_count.numel() == 1 && global_count.scalar_type() == at::kDouble &&
                 global_count.device() == flat_grads.device(),
             "optimizer step: the global count must be one float64 element on the gradients' device");
  c10::NoGradGuard no_grad;
  StepResult out;
  out.lr = schedule_.lr(step);
  out.count = global_count;
  // The norm accumulates in float32 for half/bfloat16/float32 gradients, in float64 for float64 ones.
  const at::ScalarType norm_dtype = flat_grads.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  const at::Tensor scaled_norm = at::linalg_vector_norm(flat_grads, 2, {}, false, norm_dtype);  // N_s
  // 1 / (S C), formed in float64 (C is exact there) and rounded once to the norm's dtype.
  const at::Tensor inv =
      at::reciprocal(scaler_.scale_tensor().squeeze(0).to(at::kDouble) * global_count.squeeze(0)).to(norm_dtype);
  out.grad_norm = scaled_norm * inv;  // N
  out.found_inf = at::logical_not(at::isfinite(out.grad_norm)).to(at::kFloat).reshape({1});
  at::Tensor factor = inv;  // c / (S C)
  if (max_norm_ > 0) {
    const at::Tensor clip = at::clamp_max(max_norm_ / (out.grad_norm + 1e-6), 1.0);  // c (N <= max: c >= 1 -> 1)
    factor = at::where(out.grad_norm > max_norm_, clip, at::ones_like(clip)) * inv;
  }
  // One multiply normalises, unscales and clips. On a skipped step the grads hold inf/NaN
  // (or C = 0) and are zeroed before the next one.
  flat_grads.mul_(factor);
  optimizer_.step(out.lr, out.found_inf);
  scaler_.update(out.found_inf);
  return out;
}

}  // namespace tupe::trainer
