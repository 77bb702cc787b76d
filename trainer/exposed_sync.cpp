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
// One pair of timing events per step not yet read; the pairs are reused. Pairs [head, used)
// are pending; the ones before head were read. A job that never takes (fine-tuning) keeps the
// pool at the steps the device is behind: each step first reads the pairs already done.
struct ExposedSyncTimer::CudaEvents {
  std::vector<std::unique_ptr<at::cuda::CUDAEvent>> begin, end;
  size_t head = 0, used = 0;
  /// Adds the elapsed time of the pending pairs to `seconds`, from the front, while their end
  /// has completed (`wait`: all of them, waiting for the last); recycles the pool when empty.
  void read(double& seconds, bool wait) {
    if (wait && used > head) end[used - 1]->synchronize();
    while (head < used && (wait || end[head]->query())) {
      seconds += begin[head]->elapsed_time(*end[head]) / 1000.0;
      ++head;
    }
    if (head == used) head = used = 0;
  }
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

void ExposedSyncTimer::backward_ended() {
#ifdef TUPE_HAVE_NCCL
  if (cuda_) {
    CudaEvents& e = *events_;
    e.read(host_seconds_, /*wait=*/false);
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
    events_->read(host_seconds_, /*wait=*/true);
  }
#endif
  return std::exchange(host_seconds_, 0.0);
}

}  // namespace tupe::trainer
