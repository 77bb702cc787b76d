// RAII autocast region for mixed precision (bf16 on CPU or GPU, fp16 on GPU): inside it,
// matmuls, linear layers and attention run in the low precision while the parameters (the
// fp32 master weights) and reductions such as LayerNorm and the loss stay fp32.
#pragma once
#include <ATen/autocast_mode.h>

#include "common/error.h"
#include "trainer/options.h"

namespace tupe::trainer {

/// The autocast dtype of a precision: bf16, fp16, or float (fp32: autocast off). auto must
/// be resolved first (resolve_precision in options.h); throws tupe::Error for it.
inline at::ScalarType autocast_dtype(Precision p) {
  switch (p) {
    case Precision::kBf16: return at::kBFloat16;
    case Precision::kFp16: return at::kHalf;
    case Precision::kFp32: return at::kFloat;
    case Precision::kAuto: break;
  }
  TUPE_FAIL("autocast_dtype: precision auto was not resolved to the device (resolve_precision)");
}

class AutocastScope {
 public:
  /// dtype = at::kBFloat16 or at::kHalf enables autocast on `device_type`; at::kFloat
  /// (fp32 training) makes the scope a no-op.
  AutocastScope(at::DeviceType device_type, at::ScalarType dtype) : device_type_(device_type) {
    enabled_ = dtype == at::kBFloat16 || dtype == at::kHalf;
    if (!enabled_) return;
    previous_enabled_ = at::autocast::is_autocast_enabled(device_type_);
    previous_dtype_ = at::autocast::get_autocast_dtype(device_type_);
    at::autocast::set_autocast_dtype(device_type_, dtype);
    at::autocast::set_autocast_enabled(device_type_, true);
    at::autocast::increment_nesting();
  }
  ~AutocastScope() {
    if (!enabled_) return;
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();  // cached casts of the weights
    at::autocast::set_autocast_enabled(device_type_, previous_enabled_);
    at::autocast::set_autocast_dtype(device_type_, previous_dtype_);
  }
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  at::DeviceType device_type_;
  bool enabled_ = false, previous_enabled_ = false;
  at::ScalarType previous_dtype_ = at::kFloat;
};

}  // namespace tupe::trainer
