// train.profile_steps = A:B on one rank: LibTorch's profiler (dist/trace.h ProfilerSession)
// from the start of optimizer step A (before its data wait) to the end of step B (after its
// validation and checkpoint, when due), written as a Chrome/Perfetto trace to
//   <checkpoint.dir>/traces/rank<R>-steps<A>-<B>.json
// (docs/profiling.md). Each traced step is a range "step <N>" holding the step's own ranges
// (dist/trace.h), as PyTorch's ProfilerStep#N. A run resumed inside A..B traces from its first step to B; one resumed
// past B, or stopped before A, writes nothing; a run stopped by a signal inside A..B writes
// the steps it ran (finish()).
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "dist/trace.h"
#include "trainer/pretrain/train_options.h"

namespace tupe::pretrain {

/// "<dir>/traces/rank<rank>-steps<first>-<last>.json".
std::string trace_path(const std::string& checkpoint_dir, int rank, const ProfileStepRange& range);

class StepTrace {
 public:
  /// `range`: nullopt = off (every call does nothing). `cuda`: record CUDA kernels too.
  StepTrace(std::optional<ProfileStepRange> range, const std::string& checkpoint_dir, int rank, bool cuda);

  /// Before step `step` (1-based) takes its batch: starts the profiler at the first step in
  /// A..B. Throws tupe::Error when a profiler already runs on this thread.
  void before_step(int64_t step);
  /// After step `step` and what follows it (validation, checkpoint): at B, stops the profiler
  /// and writes the trace. Returns the trace's path when it wrote one, else "". Throws
  /// tupe::Error when the file cannot be written.
  std::string after_step(int64_t step);
  /// Stops a trace still running and writes it (a run stopped inside A..B). Returns its path,
  /// else "".
  std::string finish();

 private:
  std::optional<ProfileStepRange> range_;
  std::string path_;
  dist::ProfilerSession session_;
  std::optional<dist::TraceRange> step_range_;  ///< "step <N>" while a traced step runs
  bool done_ = false;
};

}  // namespace tupe::pretrain
