#include "trainer/exposed_sync.h"

#include <utility>
#include <vector>

#include "common/error.h"

#ifdef TUPE_HAVE_NCCL
#include <ATen/cuda/CUDAEvent.h>
#include <cuda_runtime_api.h>
#endif

namespace tupe::trainer {

#ifdef TUPE_HAVE_NCCL
// One pair of timing events per step since the last take; the pairs are reused.
struct ExposedSyncTimer::CudaEvents {
  std::vector<std::unique_ptr<at::cuda::CUDAEvent>> begin, end;
  size_t used = 0;  ///< pairs recorded since the last take
};
#else
struct ExposedSyncTimer::CudaEvents {};
#endif

ExposedSyncTimer::ExposedSyncTimer(const c10::Device& device) : cuda_(device.is_cuda()) {
#ifdef TUPE_HAVE_NCCL
  if (cuda_) events_ = std::make_unique<CudaEvents>();
#else
  TUPE_CHECK(!cuda_, "exposed sync timer: a CUDA device in a build without CUDA");
#endif
}

ExposedSyncTimer::~ExposedSyncTimer() = default;

const char* ExposedSyncTimer::clock() const { return cuda_ ? "CUDA events" : "host clock"; }

void ExposedSyncTimer::backward_ended() {
#ifdef TUPE_HAVE_NCCL
  if (cuda_) {
    CudaEvents& e = *events_;
    if (e.used == e.begin.size()) {
      e.begin.push_back(std::make_unique<at::cuda::CUDAEvent>(cudaEventDefault));
      e.end.push_back(std::make_unique<at::cuda::CUDAEvent>(cudaEventDefault));
    }
    e.begin[e.used]->record();
    return;
  }
#endif
  backward_end_ = std::chrono::steady_clock::now();
}

void ExposedSyncTimer::sync_finished() {
#ifdef TUPE_HAVE_NCCL
  if (cuda_) {
    CudaEvents& e = *events_;
    e.end[e.used++]->record();
    return;
  }
#endif
  host_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - backward_end_).count();
}

double ExposedSyncTimer::take_seconds() {
#ifdef TUPE_HAVE_NCCL
  if (cuda_) {
    CudaEvents& e = *events_;
    double ms = 0;
    if (e.used > 0) e.end[e.used - 1]->synchronize();
    for (size_t i = 0; i < e.used; ++i) ms += e.begin[i]->elapsed_time(*e.end[i]);
    e.used = 0;
    return ms / 1000.0;
  }
#endif
  return std::exchange(host_seconds_, 0.0);
}

}  // namespace tupe::trainer
