// Dynamic loss scaling for fp16 training (Micikevicius et al. 2018; the rules of
// torch.amp.GradScaler / fairseq's DynamicLossScaler), with its state on the device so a
// step never waits for the host:
//   - the loss is multiplied by S before backward (scale_loss: a device multiply);
//   - after the gradient sync, trainer/optimizer_step.h finds inf/NaN grads (found_inf, a
//     device flag), unscales and clips, and the optimizer skips the update on the device;
//   - update(found_inf): a skipped step sets S <- S * backoff_factor and resets the growth
//     tracker; growth_interval consecutive finite steps set S <- S * growth_factor
//     (at::_amp_update_scale_, what torch.amp.GradScaler runs); the skip counters
//     (consecutive, total, the longest run since the last check) are device tensors too;
//   - check_divergence(step), on log steps (a host sync): when some run of consecutive
//     skips reached max_consecutive_skips since the last check, the run aborts with a
//     tupe::Error naming the steps and the count.
// With bf16/fp32 (no scaling) S stays 1, but inf/NaN steps are still skipped and counted.
#pragma once
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>

#include "checkpoint/trainer_state.h"
#include "trainer/options.h"

namespace tupe::trainer {

class DynamicLossScaler {
 public:
  /// Scaling is on for precision fp16 only (S starts at initial_scale); otherwise S = 1.
  /// The state starts on the CPU; to() moves it. Throws tupe::Error on bad options.
  explicit DynamicLossScaler(const PrecisionOptions& options);

  /// Moves the device-side state to `device` (the gradients' device).
  void to(const c10::Device& device);
  bool scaling_enabled() const { return scaling_enabled_; }

  /// loss * S (a device multiply when scaling; `loss` itself otherwise). Differentiable.
  at::Tensor scale_loss(const at::Tensor& loss) const;
  /// S: a 1-element float32 tensor on the state's device.
  const at::Tensor& scale_tensor() const { return scale_; }

  /// Records one optimizer step's outcome on the device. `found_inf`: 1-element float32
  /// (1 = the grads held inf/NaN and the step was skipped, 0 = applied) on the state's
  /// device. No host sync.
  void update(const at::Tensor& found_inf);

  /// Throws tupe::Error "loss scaler: by step <step>: <k> consecutive steps ..." when a run
  /// of at least max_consecutive_skips skipped steps happened since the previous call (or
  /// the start), then starts a new window. Reads the device (a host sync): call it on log
  /// steps.
  void check_divergence(int64_t step);

  /// S as a host value (a host sync).
  double scale() const;
  /// The state as host values (a host sync): for logs and checkpoints.
  checkpoint::LossScalerState state() const;
  /// Restores a saved state; throws tupe::Error when it is invalid (scale <= 0, counts < 0).
  void load_state(const checkpoint::LossScalerState& state);

 private:
  PrecisionOptions options_;
  bool scaling_enabled_;
  int64_t checked_until_ = 0;  ///< updates seen by the last check_divergence (for messages)
  int64_t updates_ = 0;        ///< update() calls so far in this process
  at::Tensor scale_;           ///< (1,) float32: S
  at::Tensor growth_tracker_;  ///< (1,) int32: consecutive finite steps since the last change
  at::Tensor consecutive_;     ///< (1,) float32: current run of skipped steps
  at::Tensor total_;           ///< (1,) float32: skipped steps over the run
  at::Tensor longest_;         ///< (1,) float32: longest run of skips since the last check
};

}  // namespace tupe::trainer
