// A bounded start-up. From the moment a rank starts until the job's work begins (step 1 of a
// pre-training, a preprocess's first piece, a fine-tuning's first task), every wait on the
// other ranks is one named *start-up phase* with a deadline, so that a node that freezes
// (a stalled shared file system, a SIGSTOPped machine) ends the job in one line instead of
// keeping the allocation waiting with no end:
//
//   MPI start-up   MPI_Init_thread, the node split and the host-name gather in MpiEnv's
//                  constructor, bounded by $TUPE_STARTUP_TIMEOUT_S (default 600 s: the config
//                  is not read yet);
//   every phase    after the config is read, bounded by dist.startup_timeout_s (0: the same
//   after it       as dist.timeout_s): "config check", "placement", "communicator", "data
//                  check", "resume checks", "input check", ... (the small collectives of
//                  dist/small_collectives.h open one each; a job may open one around any other wait).
//
// Who is missing. On entering a phase every rank but 0 sends rank 0 a one-number arrival
// message (its own communicator, tag = the phase's sequence number). At the deadline rank 0
// names the ranks whose arrival has not come, with their hosts:
//   "tupe: start-up: phase 'config check' did not finish within 15 s: ranks 2-3 (node2) did
//    not arrive; ending the job (dist.startup_timeout_s)".
// The other ranks wait 10 s longer, so that rank 0's line is the one printed; if rank 0 did
// not end the job by then, rank 0 itself is missing or late, and they say so. Under
// MPI_THREAD_SERIALIZED the missing ranks cannot be probed while the main thread waits in a
// collective; the line then says that they are not known.
//
// The deadline is kept by one thread per process (StartupWatch); it ends the job through
// MpiEnv::abort (before MPI is up: prints and exits with status 1, which makes the launcher
// stop the other ranks).
#pragma once
#include <mpi.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace tupe::dist {

class MpiEnv;

/// Extra seconds the ranks other than 0 wait past a phase's limit before reporting, so that
/// rank 0 (which knows who is missing) reports first.
inline constexpr double kStartupGraceNonRoot_s = 10.0;

/// Name of the environment variable bounding MPI start-up itself (seconds; 0 = unbounded).
inline constexpr const char* kStartupTimeoutEnv = "TUPE_STARTUP_TIMEOUT_S";
inline constexpr double kDefaultStartupTimeout_s = 600.0;
/// The name of the first phase (MpiEnv's constructor), for TUPE_TEST_STALL's phase=.
inline constexpr const char* kMpiStartupPhase = "MPI start-up";

/// One deadline at a time, kept by a background thread: at the deadline `fire` runs on that
/// thread (it must end the process; if it returns, the watch disarms). Thread-safe.
class StartupWatch {
 public:
  StartupWatch();
  /// Stops and joins the thread (a pending deadline is dropped).
  ~StartupWatch();
  StartupWatch(const StartupWatch&) = delete;
  StartupWatch& operator=(const StartupWatch&) = delete;

  /// Arms the deadline `seconds` from now (replacing any armed one); seconds <= 0: disarms.
  void arm(double seconds, std::function<void()> fire);
  void disarm();

 private:
  void run();
  std::mutex mutex_;
  std::condition_variable wake_;
  bool armed_ = false, stop_ = false;
  uint64_t generation_ = 0;  ///< bumped by every arm/disarm, so a stale fire is not run
  std::chrono::steady_clock::time_point deadline_;
  std::function<void()> fire_;
  std::thread thread_;  ///< last: starts after the members above
};

/// $TUPE_STARTUP_TIMEOUT_S as seconds (default kDefaultStartupTimeout_s). Throws tupe::Error
/// "TUPE_STARTUP_TIMEOUT_S: ..." for a value that is not a number >= 0.
double startup_timeout_from_env();

/// "ranks 2-3 (node2), rank 5 (node3)": `ranks` (ascending) with their hosts (hosts[r]; empty
/// hosts are left out), consecutive ranks of one host joined.
std::string describe_ranks(const std::vector<int>& ranks, const std::vector<std::string>& hosts);

/// One start-up phase (RAII; collective in the sense that every rank opens the same phases in
/// the same order). Opening it sends the arrival message and arms the deadline; closing it
/// (after the phase's collectives returned) collects the arrivals and disarms. A no-op on one
/// rank, after MpiEnv::end_startup(), or when the start-up timeout is 0. Test hook:
/// TUPE_TEST_STALL="rank=R,phase=NAME[,seconds=T]" makes rank R sleep T s on entering the
/// phase (dist/stall_injection.h). Throws tupe::Error on an MPI error.
class StartupPhase {
 public:
  StartupPhase(const MpiEnv& env, std::string name);
  ~StartupPhase();
  StartupPhase(const StartupPhase&) = delete;
  StartupPhase& operator=(const StartupPhase&) = delete;

 private:
  /// The one line rank 0 prints at the deadline (tests its arrival requests).
  std::string missing_line() const;
  const MpiEnv& env_;
  const std::string name_;
  bool active_ = false;
  double limit_s_ = 0;
  const int uncaught_at_start_ = std::uncaught_exceptions();  ///< to tell an unwinding close
  std::vector<int64_t> arrivals_;      ///< rank 0: one slot per rank; others: the one sent
  std::vector<MPI_Request> requests_;  ///< rank 0: a receive per rank (slot 0 unused); others: the send
};

}  // namespace tupe::dist
