// Collective timeout watchdog: a background thread that knows every collective in flight
// (name, step, deadline) and ends the whole job, with one line naming the rank, the step
// and the collective, when one has not finished by its deadline -- never a silent hang.
//
// A collective counts as finished when its handle deregisters it (Work::wait/test saw it
// complete) or when its is_completed() probe says so: every poll the thread probes all
// entries (so a collective that finished long before a late wait() is not a hang, and
// NCCL handles that were only stream-waited do not pile up). Probes run on the watchdog
// thread and must be thread-safe and non-blocking. A probe that throws (an NCCL probe that
// meets a sticky CUDA error, say an illegal address in a kernel before the collective) ends
// the job at once with that error in the line, instead of waiting for the deadline and
// reporting a hang.
#pragma once
#include <c10/core/Device.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>

namespace tupe::dist {

class Watchdog {
 public:
  /// Receives the one-line message of a timed-out collective and ends the job (in
  /// production MpiEnv::abort, which does not return; tests may record and return).
  using AbortFn = std::function<void(const std::string& message)>;

  /// Starts the thread. `timeout_s` > 0 (seconds) is the limit per collective; the deadline
  /// check runs every `poll` (default: timeout / 20, between 10 ms and 1 s). `device` is the
  /// rank's device: on a GPU the thread makes it current first, so that its completion
  /// probes (CUDA event queries) do not open a context on device 0.
  Watchdog(int rank, double timeout_s, AbortFn abort,
           std::chrono::milliseconds poll = std::chrono::milliseconds(0),
           c10::Device device = c10::Device(c10::kCPU));
  /// Stops and joins the thread.
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  /// Registers a collective launched now; returns its id for finish(). `is_completed` is a
  /// non-blocking, thread-safe probe (may be empty: then only finish() ends the entry); when
  /// it throws, the job ends with "watchdog: rank R: collective 'NAME' at step S failed:
  /// <what()>; aborting the job".
  uint64_t start(std::string name, int64_t step, std::function<bool()> is_completed);
  /// Deregisters a collective (unknown ids are ignored, so calling twice is fine).
  void finish(uint64_t id);

  size_t in_flight() const;   ///< collectives registered and not finished
  double timeout_s() const { return timeout_s_; }
  /// Number of timeouts and probe failures reported (1 at most in production, since the job
  /// ends).
  int64_t fired() const;

 private:
  struct Entry {
    std::string name;
    int64_t step;
    std::chrono::steady_clock::time_point deadline;
    std::function<bool()> is_completed;
  };
  void run();

  const int rank_;
  const double timeout_s_;
  const AbortFn abort_;
  const std::chrono::milliseconds poll_;
  const c10::Device device_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::map<uint64_t, Entry> entries_;  ///< id -> in-flight collective (guarded by mutex_)
  uint64_t next_id_ = 1;
  int64_t fired_ = 0;
  bool stop_ = false;
  std::thread thread_;  ///< last member: starts after everything above is initialised
};

}  // namespace tupe::dist
