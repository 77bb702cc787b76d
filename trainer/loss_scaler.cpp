#include "trainer/loss_scaler.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <cmath>

#include "common/error.h"

namespace tupe::trainer {

namespace {
at::Tensor scalar(double v, at::ScalarType dtype, const c10::Device& device) {
  return at::full({1}, v, at::TensorOptions().dtype(dtype).device(device));
}
}  // namespace

DynamicLossScaler::DynamicLossScaler(const PrecisionOptions& options)
    : options_(options), scaling_enabled_(options.precision == Precision::kFp16) {
  options_.validate();
  TUPE_CHECK(options.precision != Precision::kAuto,
             "loss scaler: precision.precision auto was not resolved to the device (trainer::resolve_precision)");
  load_state(checkpoint::LossScalerState{scaling_enabled_ ? options_.initial_scale : 1.0, 0, 0, 0});
}

void DynamicLossScaler::to(const c10::Device& device) {
  for (at::Tensor* t : {&scale_, &growth_tracker_, &consecutive_, &total_, &longest_}) *t = t->to(device);
}

at::Tensor DynamicLossScaler::scale_loss(const at::Tensor& loss) const {
  return scaling_enabled_ ? loss * scale_.to(loss.device()).squeeze(0) : loss;
}

void DynamicLossScaler::update(const at::Tensor& found_inf) {
  c10::NoGradGuard no_grad;
  const at::Tensor f = found_inf.reshape({1}).to(at::kFloat);
  if (scaling_enabled_) {
    // S <- S * backoff on inf/NaN (tracker 0); after growth_interval clean steps S <- S * growth.
    at::_amp_update_scale_(scale_, growth_tracker_, f, options_.growth_factor, options_.backoff_factor,
                           options_.growth_interval);
  }
  consecutive_.add_(1.0).mul_(f);  // a clean step ends the run
  total_.add_(f);
  at::maximum_out(longest_, longest_, consecutive_);
  ++updates_;
}

void DynamicLossScaler::check_divergence(int64_t step) {
  const double longest = longest_.item<double>();
  const int64_t since = checked_until_;
  checked_until_ = updates_;
  longest_.copy_(consecutive_);  // the new window starts with the run still going on
  TUPE_CHECK(longest < static_cast<double>(options_.max_consecutive_skips),
             "loss scaler: by step " << step << ": " << static_cast<int64_t>(longest)
                                     << " consecutive steps had inf/NaN gradients and were skipped in the last "
                                     << (updates_ - since) << " steps (precision.max_consecutive_skips = "
                                     << options_.max_consecutive_skips << ", loss scale now " << scale()
                                     << "): training diverged; lower optimizer.lr or check the data");
}

double DynamicLossScaler::scale() const { return scale_.item<double>(); }

checkpoint::LossScalerState DynamicLossScaler::state() const {
  checkpoint::LossScalerState s;
  s.scale = scale();
  s.growth_tracker = growth_tracker_.item<int64_t>();
  s.consecutive_skips = static_cast<int64_t>(consecutive_.item<double>());
  s.total_skips = static_cast<int64_t>(total_.item<double>());
  return s;
}

void DynamicLossScaler::load_state(const checkpoint::LossScalerState& s) {
  TUPE_CHECK(s.scale > 0 && std::isfinite(s.scale), "loss scaler state: scale must be positive and finite, got " << s.scale);
  TUPE_CHECK(s.growth_tracker >= 0 && s.consecutive_skips >= 0 && s.total_skips >= 0,
             "loss scaler state: negative counter (growth_tracker " << s.growth_tracker << ", consecutive_skips "
                                                                  << s.consecutive_skips << ", total_skips "
                                                                  << s.total_skips << ")");
  const c10::Device device = scale_.defined() ? scale_.device() : c10::Device(c10::kCPU);
  scale_ = scalar(scaling_enabled_ ? s.scale : 1.0, at::kFloat, device);  // e.g. fp16 resumed in bf16: S = 1
  growth_tracker_ = scalar(static_cast<double>(s.growth_tracker), at::kInt, device);
  consecutive_ = scalar(static_cast<double>(s.consecutive_skips), at::kFloat, device);
  total_ = scalar(static_cast<double>(s.total_skips), at::kFloat, device);
  longest_ = consecutive_.clone();
}

}  // namespace tupe::trainer
