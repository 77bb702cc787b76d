// The life of a communicator's backend (its NCCL communicator, its MPI requests), shared by
// the communicator and every Work handle it launched, so that nothing touches the backend
// after it was aborted ("Failure paths" in dist/communicator.h).
//
// - while_alive(call) runs a backend call under the lifetime's lock unless the backend has
//   ended; abort() and close() take the same lock, so an abort from the watchdog thread
//   never frees the backend under a call in progress, and no call starts after it.
// - abort() ends it at once without waiting for peers (its action: ncclCommAbort); close()
//   ends it in order (ncclCommDestroy after a finalize). Either happens once.
// - park() keeps what an incomplete handle still lends to the backend (tensors an MPI
//   request may write into) alive after the handle is gone; if any is parked when the
//   lifetime ends, it is deliberately never freed (the process is ending with an abort, and
//   MPI may still write there in MPI_Abort or MPI_Finalize).
// Backend calls made through while_alive must not block (NCCL's are non-blocking here).
#pragma once
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

namespace tupe::dist {

class BackendLifetime {
 public:
  BackendLifetime() = default;
  /// Parked leftovers are leaked on purpose (see above).
  ~BackendLifetime();
  BackendLifetime(const BackendLifetime&) = delete;
  BackendLifetime& operator=(const BackendLifetime&) = delete;

  /// What abort() runs, under the lock (NCCL: ncclCommAbort of the communicator). Set once
  /// the backend's handles exist; must not throw or wait for peers.
  void set_abort_action(std::function<void()> action);

  /// Runs `call()` holding the lock, unless the backend has ended; returns whether it ran.
  /// `call` must not block, nor call abort()/close() (the lock is not recursive).
  template <class Call>
  bool while_alive(Call&& call) {
    std::unique_lock<std::timed_mutex> lock(mutex_);
    if (ended_.load()) return false;
    call();
    return true;
  }

  /// Ends the backend now: marks it aborted and runs the abort action, once. From any
  /// thread. Waits at most about 2 s for a call in progress; past that it marks the
  /// backend ended without running the action (the job is being ended anyway). Returns
  /// false when the backend had already ended.
  bool abort() noexcept;
  /// Ends the backend in order: runs `finish` (e.g. ncclCommDestroy) under the lock, once,
  /// unless it already ended (then returns false and runs nothing).
  bool close(const std::function<void()>& finish) noexcept;

  bool ended() const noexcept { return ended_.load(); }
  /// True when abort() ended it (not close()).
  bool aborted() const noexcept { return aborted_.load(); }

  /// Keeps `leftovers` alive for as long as the backend might still use them (see above).
  void park(std::shared_ptr<void> leftovers);
  /// How many leftovers were parked (for tests).
  size_t parked() const;

 private:
  mutable std::timed_mutex mutex_;
  std::atomic<bool> ended_{false};
  std::atomic<bool> aborted_{false};
  std::function<void()> abort_action_;         ///< guarded by mutex_
  std::vector<std::shared_ptr<void>> parked_;  ///< guarded by mutex_
};

/// True while the calling thread is unwinding an exception beyond what it was unwinding
/// when `baseline` was taken (std::uncaught_exceptions() then). Destructors use it to abort
/// instead of finishing in order (waiting for peers) when an error is on its way out.
inline bool unwinding_since(int baseline) noexcept { return std::uncaught_exceptions() > baseline; }

}  // namespace tupe::dist
