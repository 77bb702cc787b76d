#include "dist/trace.h"

#include <c10/util/ApproximateClock.h>
#include <torch/csrc/autograd/profiler_kineto.h>

#include <filesystem>

#include "common/error.h"

#ifdef TUPE_HAVE_NCCL
#include <nvtx3/nvToolsExt.h>
#endif

namespace tupe::dist {

namespace profiler = torch::autograd::profiler;
namespace impl = torch::profiler::impl;

std::string trace_names::all_reduce_bucket(size_t index) { return "all-reduce bucket " + std::to_string(index); }

TraceRange::TraceRange(const char* name) : record_(at::RecordScope::USER_SCOPE) { open(name); }

TraceRange::TraceRange(std::string name) : owned_name_(std::move(name)), record_(at::RecordScope::USER_SCOPE) {
  open(owned_name_.c_str());
}

void TraceRange::open(const char* name) {
  if (record_.isActive()) record_.before(name);
#ifdef TUPE_HAVE_NCCL
  nvtxRangePushA(name);
#endif
}

TraceRange::~TraceRange() {
#ifdef TUPE_HAVE_NCCL
  nvtxRangePop();
#endif
  // record_'s destructor ends the RecordFunction.
}

void AsyncTraceRange::begin() {
  begin_ns_ = c10::getTime();
  end_ns_ = 0;
  open_ = true;
#ifdef TUPE_HAVE_NCCL
  nvtx_id_ = nvtxRangeStartA(name_.c_str());
#endif
}

void AsyncTraceRange::mark_end() {
  if (open_ && end_ns_ == 0) end_ns_ = c10::getTime();
}

void AsyncTraceRange::end() {
  if (!open_) return;
  mark_end();
  open_ = false;
#ifdef TUPE_HAVE_NCCL
  nvtxRangeEnd(nvtx_id_);
#endif
  if (impl::profilerEnabled() && impl::profilerType() == impl::ActiveProfilerType::KINETO)
    profiler::reportBackendEventToActiveKinetoProfiler(begin_ns_ / 1000, end_ns_ / 1000, /*debug_handle=*/-1,
                                                       at::RecordScope::USER_SCOPE, name_, "tupe");
}

ProfilerSession::ProfilerSession(bool cuda) : cuda_(cuda) {}

ProfilerSession::~ProfilerSession() {
  if (!running_) return;
  try {
    profiler::disableProfiler();
  } catch (...) {
    // A destructor cannot report; the trace is dropped.
  }
}

namespace {
std::set<impl::ActivityType> activities(bool cuda) {
  std::set<impl::ActivityType> a{impl::ActivityType::CPU};
  if (cuda) a.insert(impl::ActivityType::CUDA);
  return a;
}
}  // namespace

void ProfilerSession::start() {
  TUPE_CHECK(!running_ && !impl::profilerEnabled(), "trace: a profiler is already running on this thread");
  const impl::ProfilerConfig config(impl::ProfilerState::KINETO);
  profiler::prepareProfiler(config, activities(cuda_));
  profiler::enableProfiler(config, activities(cuda_));
  running_ = true;
}

void ProfilerSession::stop_and_save(const std::string& path) {
  TUPE_CHECK(running_, "trace: stop_and_save without start");
  running_ = false;
  std::unique_ptr<profiler::ProfilerResult> result = profiler::disableProfiler();
  TUPE_CHECK(result != nullptr, "trace: LibTorch's profiler returned no result for " << path);
  std::error_code ec;
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  TUPE_CHECK(!ec, parent.string() << ": cannot create the trace folder: " << ec.message());
  result->save(path);
  TUPE_CHECK(std::filesystem::exists(path), path << ": LibTorch's profiler did not write the trace");
}

}  // namespace tupe::dist
