// Named ranges of a training step's timeline, and LibTorch's profiler around a few steps
// (train.profile_steps; docs/profiling.md "Finding where the time goes").
//
// A range is a LibTorch RecordFunction user scope ("user_annotation" in the trace LibTorch's
// profiler writes) and, in builds with CUDA (TUPE_HAVE_NCCL), an NVTX range of the same name
// (what Nsight Systems shows). With no profiler running, a range costs one thread-local check
// (RecordFunction's "any callbacks?") plus, in CUDA builds, two calls into NVTX's no-op stubs
// (bench/RESULTS.md "What a trace costs when off").
//
// dist/ holds this because it is the lowest layer that every training layer may use
// (dist/ddp's buckets, trainer/'s step, the jobs); it knows nothing of what the ranges mean.
#pragma once
#include <ATen/record_function.h>

#include <cstdint>
#include <memory>
#include <set>
#include <string>

namespace tupe::dist {

/// The range names, one place for the code, the docs and the tests.
namespace trace_names {
inline constexpr const char* kForward = "forward";              ///< a micro-batch's forward and loss
inline constexpr const char* kBackward = "backward";            ///< a micro-batch's backward
inline constexpr const char* kGradSyncWait = "gradient sync wait";  ///< finish_grad_sync after the last backward
inline constexpr const char* kOptimizer = "optimizer";          ///< norm, clip, update, scaler, LR
inline constexpr const char* kDataWait = "data wait";           ///< the loop waiting for its next batch
inline constexpr const char* kValidation = "validation";        ///< one evaluation of the held-out split
inline constexpr const char* kCheckpointSave = "checkpoint save";  ///< one checkpoint (rank 0 writes, all agree)
/// "all-reduce bucket <i>": bucket i's all-reduce, from its launch to when the host saw it done.
std::string all_reduce_bucket(size_t index);
}  // namespace trace_names

/// A scoped range on the calling thread (RAII): opened by the constructor, closed by the
/// destructor.
class TraceRange {
 public:
  /// `name` must outlive the range (a string literal, or trace_names).
  explicit TraceRange(const char* name);
  /// A name built at run time (kept by the range; build it only when tracing: the string
  /// itself is the cost).
  explicit TraceRange(std::string name);
  ~TraceRange();
  TraceRange(const TraceRange&) = delete;
  TraceRange& operator=(const TraceRange&) = delete;

 private:
  void open(const char* name);
  std::string owned_name_;  ///< the run-time name (declared first: it outlives record_)
  at::RecordFunction record_;
};

/// A range whose end is known only later, possibly on another thread (a bucket's all-reduce:
/// launched from an autograd hook, seen complete by the step). begin() notes the time (ns,
/// the profiler's clock) and opens an NVTX start/end range; end() closes it and, when a
/// profiler runs on the calling thread, reports [begin, end] to it. Lifecycle: begin -> end ->
/// begin ... (a second end() does nothing).
class AsyncTraceRange {
 public:
  explicit AsyncTraceRange(std::string name) : name_(std::move(name)) {}
  const std::string& name() const { return name_; }
  void begin();
  /// Notes the time the range ended without closing it (the first call counts).
  void mark_end();
  /// Closes the range: at the time mark_end() noted, else now.
  void end();

 private:
  std::string name_;
  int64_t begin_ns_ = 0, end_ns_ = 0;  ///< c10::getTime(); end_ns_ 0 = not marked
  uint64_t nvtx_id_ = 0;               ///< NVTX range id (CUDA builds)
  bool open_ = false;
};

/// LibTorch's profiler (Kineto) on the calling thread and the threads it starts (autograd's
/// device threads inherit it): every ATen op and every range above, plus CUDA kernels and
/// memory copies when `cuda`. start() once, then stop_and_save() once; the destructor stops
/// a session still running without saving. Throws tupe::Error when a profiler is already
/// running on this thread, or when the trace cannot be written.
class ProfilerSession {
 public:
  explicit ProfilerSession(bool cuda);
  ~ProfilerSession();
  ProfilerSession(const ProfilerSession&) = delete;
  ProfilerSession& operator=(const ProfilerSession&) = delete;

  void start();
  bool running() const { return running_; }
  /// Stops the profiler and writes its Chrome trace-event JSON to `path` (its folder is
  /// created), what Perfetto (ui.perfetto.dev) and chrome://tracing open.
  void stop_and_save(const std::string& path);

 private:
  bool cuda_;
  bool running_ = false;
};

}  // namespace tupe::dist
