#include "trainer/loss_scaler.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <cmath>

#include "common/error.h"
#include "trainer/grad_clip.h"

namespace tupe::trainer {

DynamicLossScaler::DynamicLossScaler(const PrecisionOptions& options)
    : options_(options), scaling_enabled_(options.precision == Precision::kFp16) {
  options_.validate();
  state_.scale = scaling_enabled_ ? options_.initial_scale : 1.0;
}

at::Tensor DynamicLossScaler::scale_loss(const at::Tensor& loss) const {
  return scaling_enabled_ ? loss * state_.scale : loss;
}

DynamicLossScaler::GradCheck DynamicLossScaler::unscale_clip_and_check(const std::vector<at::Tensor>& grads,
                                                                      double max_norm) const {
  GradCheck out;
  const double scaled_norm = global_grad_norm(grads);  // the one host sync
  out.norm = scaled_norm / state_.scale;
  out.finite = std::isfinite(scaled_norm);
  if (!out.finite) return out;
  const bool clip = max_norm > 0 && out.norm > max_norm;
  if (!clip && state_.scale == 1.0) return out;
  const double factor = (clip ? max_norm / (out.norm + 1e-6) : 1.0) / state_.scale;
  c10::NoGradGuard no_grad;
  for (const at::Tensor& g : grads) {
    at::Tensor grad = g;
    grad.mul_(factor);
  }
  return out;
}

bool DynamicLossScaler::update(bool grads_finite, int64_t step) {
  if (grads_finite) {
    state_.consecutive_skips = 0;
    if (scaling_enabled_ && ++state_.growth_tracker >= options_.growth_interval) {
      const double grown = state_.scale * options_.growth_factor;
      if (std::isfinite(grown)) state_.scale = grown;
      state_.growth_tracker = 0;
    }
    return true;
  }
  ++state_.consecutive_skips;
  ++state_.total_skips;
  state_.growth_tracker = 0;
  if (scaling_enabled_) state_.scale *= options_.backoff_factor;
  TUPE_CHECK(state_.consecutive_skips < options_.max_consecutive_skips,
             "loss scaler: step " << step << ": " << state_.consecutive_skips
                                  << " consecutive steps had inf/NaN gradients and were skipped "
                                     "(precision.max_consecutive_skips = "
                                  << options_.max_consecutive_skips << ", loss scale now " << state_.scale
                                  << "): training diverged; lower optimizer.lr or check the data");
  return false;
}

void DynamicLossScaler::load_state(const LossScalerState& s) {
  TUPE_CHECK(s.scale > 0 && std::isfinite(s.scale), "loss scaler state: scale must be positive and finite, got " << s.scale);
  TUPE_CHECK(s.growth_tracker >= 0 && s.consecutive_skips >= 0 && s.total_skips >= 0,
             "loss scaler state: negative counter (growth_tracker " << s.growth_tracker << ", consecutive_skips "
                                                                  << s.consecutive_skips << ", total_skips "
                                                                  << s.total_skips << ")");
  state_ = s;
  if (!scaling_enabled_) state_.scale = 1.0;  // e.g. an fp16 checkpoint resumed in bf16
}

}  // namespace tupe::trainer
