#include "trainer/lr_schedule.h"

#include <cmath>

#include "common/error.h"

namespace tupe::trainer {

LrSchedule::LrSchedule(const OptimizerOptions& o)
    : LrSchedule(o.lr, o.warmup_steps, o.total_steps, o.schedule, o.power) {
  o.validate();
}

LrSchedule::LrSchedule(double peak_lr, int64_t warmup_steps, int64_t total_steps, ScheduleKind kind, double power)
    : peak_lr_(peak_lr), warmup_steps_(warmup_steps), total_steps_(total_steps), kind_(kind), power_(power) {
  TUPE_CHECK(peak_lr > 0 && std::isfinite(peak_lr), "optimizer.lr: must be positive, got " << peak_lr);
  TUPE_CHECK(total_steps > 0, "optimizer.total_steps: must be positive, got " << total_steps);
  TUPE_CHECK(warmup_steps >= 0 && warmup_steps <= total_steps,
             "optimizer.warmup_steps: must be in [0, total_steps = " << total_steps << "], got " << warmup_steps);
  TUPE_CHECK(power > 0, "optimizer.power: must be positive, got " << power);
}

double LrSchedule::lr(int64_t step) const {
  TUPE_CHECK(step >= 1, "lr schedule: update number must be >= 1 (counting from 1), got " << step);
  if (step <= warmup_steps_) return peak_lr_ * static_cast<double>(step) / static_cast<double>(warmup_steps_);
  if (step >= total_steps_) return 0.0;
  const double remaining =
      static_cast<double>(total_steps_ - step) / static_cast<double>(total_steps_ - warmup_steps_);
  return kind_ == ScheduleKind::kLinear ? peak_lr_ * remaining : peak_lr_ * std::pow(remaining, power_);
}

}  // namespace tupe::trainer
