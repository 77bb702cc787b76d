// The exposed gradient-sync time of a step: from the end of the last backward to the end of
// the gradient sync (dist/ddp.h finish_grad_sync), i.e. the part of the buckets' all-reduces
// that backward did not hide.
//   CPU: host wall time. The step waits in finish_grad_sync for whatever the buckets still
//        owe (MPI progresses them during backward's hooks and in the wait).
//   CUDA: two CUDA events on the step's stream, one after the last backward was queued and
//        one after finish_grad_sync made the stream wait for the NCCL stream: the time the
//        compute stream stood waiting for the last bucket (plus the bf16/fp64 copy back).
//        Read on the host only by take_seconds (the log steps).
#pragma once
#include <c10/core/Device.h>

#include <chrono>
#include <cstdint>
#include <memory>

namespace tupe::trainer {

class ExposedSyncTimer {
 public:
  /// `device`: the step's device (CUDA: events on its current stream; else host clocks).
  explicit ExposedSyncTimer(const c10::Device& device);
  ~ExposedSyncTimer();
  ExposedSyncTimer(const ExposedSyncTimer&) = delete;
  ExposedSyncTimer& operator=(const ExposedSyncTimer&) = delete;

  /// After the step's last backward returned (before finish_grad_sync).
  void backward_ended();
  /// After finish_grad_sync returned.
  void sync_finished();
  /// Seconds of exposed sync summed over the steps since the last call; resets. CUDA: waits
  /// for the last recorded event (call it where the host syncs anyway: a log step).
  double take_seconds();

 private:
  struct CudaEvents;  ///< the CUDA events of the steps since the last take (CUDA builds)
  bool cuda_;
  std::unique_ptr<CudaEvents> events_;
  std::chrono::steady_clock::time_point backward_end_;
  double host_seconds_ = 0;  ///< summed since the last take (CUDA: the pairs read so far)
};

}  // namespace tupe::trainer
