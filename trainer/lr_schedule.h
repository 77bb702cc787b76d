// Learning-rate schedules: linear warm-up from 0 to the peak, then linear or polynomial
// decay to 0 at total_steps (BERT/RoBERTa/TUPE pre-training; fairseq's polynomial_decay
// with end_learning_rate 0). A pure function of the update number.
#pragma once
#include <cstdint>

#include "trainer/options.h"

namespace tupe::trainer {

class LrSchedule {
 public:
  /// Throws tupe::Error (via OptimizerOptions::validate) on bad options.
  explicit LrSchedule(const OptimizerOptions& options);
  LrSchedule(double peak_lr, int64_t warmup_steps, int64_t total_steps, ScheduleKind kind, double power = 1.0);

  /// The LR of update number `step`, counting from 1 (= updates already applied + 1), with
  /// W = warmup_steps, T = total_steps, p = power (1 for kLinear):
  ///   step <= W:      peak * step / W
  ///   W < step < T:   peak * ((T - step) / (T - W))^p
  ///   step >= T:      0
  /// So the peak is reached at update W and the LR is 0 from update T on.
  /// Throws tupe::Error for step < 1.
  double lr(int64_t step) const;

  double peak_lr() const { return peak_lr_; }
  int64_t warmup_steps() const { return warmup_steps_; }
  int64_t total_steps() const { return total_steps_; }

 private:
  double peak_lr_;
  int64_t warmup_steps_, total_steps_;
  ScheduleKind kind_;
  double power_;
};

}  // namespace tupe::trainer
