// Host syncs of the training steps: operations that make the host wait for the device (a
// .item(), a device-to-host copy, a stream or device synchronize). Expected 0 per step
// (docs/architecture.md "One training step"); the log steps' own reads are not counted.
//
// CUDA: LibTorch's CUDA sync debug mode (c10::cuda::warning_state(), what Python's
// torch.cuda.set_sync_debug_mode("warn") sets) reports each synchronizing CUDA call as the
// warning "called a synchronizing CUDA operation"; a process-wide warning handler counts
// those inside counting() and drops them outside it, and passes every other warning on. The
// cost is nothing on a step without syncs: the check sits in the synchronizing calls only.
// CPU: every op has finished when it returns, so there is no queue a sync could stall and
// nothing to count: available() is false and the figure is left out of the metrics.
#pragma once
#include <c10/core/Device.h>

#include <atomic>
#include <cstdint>
#include <memory>

namespace tupe::trainer {

class HostSyncCounter {
 public:
  /// On a CUDA device: turns the sync debug mode to "warn" and installs the counting handler
  /// (process-wide; one counter at a time). Elsewhere: nothing.
  explicit HostSyncCounter(const c10::Device& device);
  /// Restores the previous warning handler and sync debug mode.
  ~HostSyncCounter();
  HostSyncCounter(const HostSyncCounter&) = delete;
  HostSyncCounter& operator=(const HostSyncCounter&) = delete;

  /// Whether syncs are counted (a CUDA device in a CUDA build).
  bool available() const { return handler_ != nullptr; }

  /// Counts the syncs of its lifetime (RAII; the training step).
  class Counting {
   public:
    explicit Counting(HostSyncCounter& c) : c_(c) { c_.counting_.store(true, std::memory_order_relaxed); }
    ~Counting() { c_.counting_.store(false, std::memory_order_relaxed); }
    Counting(const Counting&) = delete;
    Counting& operator=(const Counting&) = delete;

   private:
    HostSyncCounter& c_;
  };

  /// Syncs counted since the last call; resets.
  int64_t take() { return count_.exchange(0); }

 private:
  class Handler;  ///< the c10::WarningHandler (host_sync_counter.cpp)
  std::unique_ptr<Handler> handler_;
  std::atomic<bool> counting_{false};
  std::atomic<int64_t> count_{0};
};

}  // namespace tupe::trainer
