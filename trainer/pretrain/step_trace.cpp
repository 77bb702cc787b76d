#include "trainer/pretrain/step_trace.h"

#include <filesystem>

namespace tupe::pretrain {

std::string trace_path(const std::string& checkpoint_dir, int rank, const ProfileStepRange& range) {
  return (std::filesystem::path(checkpoint_dir) / "traces" /
          ("rank" + std::to_string(rank) + "-steps" + std::to_string(range.first) + "-" + std::to_string(range.last) +
           ".json"))
      .string();
}

StepTrace::StepTrace(std::optional<ProfileStepRange> range, const std::string& checkpoint_dir, int rank, bool cuda)
    : range_(range), path_(range ? trace_path(checkpoint_dir, rank, *range) : ""), session_(cuda) {}

void StepTrace::before_step(int64_t step) {
  if (!range_ || done_ || step < range_->first || step > range_->last) return;
  if (!session_.running()) session_.start();
  step_range_.emplace("step " + std::to_string(step));
}

std::string StepTrace::after_step(int64_t step) {
  step_range_.reset();
  if (!session_.running() || step < range_->last) return "";
  return finish();
}

std::string StepTrace::finish() {
  step_range_.reset();
  if (!session_.running()) return "";
  done_ = true;
  session_.stop_and_save(path_);
  return path_;
}

}  // namespace tupe::pretrain
