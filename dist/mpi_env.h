// The MPI environment of one process: RAII MPI_Init_thread / MPI_Finalize, and who this
// process is (rank, world size, local rank and local world size on its node). Which GPU a
// rank uses is decided by dist/device.h from these. A context object the CLI and the tests
// create once in main() and pass down; there are no globals.
//
// Threads: MPI_THREAD_MULTIPLE is requested. If the library grants only
// MPI_THREAD_SERIALIZED, every MPI call tupe makes holds lock() (below); a lower level is
// an error. Communicators built on this environment must be destroyed before it.
#pragma once
#include <mpi.h>

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace tupe::dist {

class StartupWatch;  // dist/startup.h, which includes this file (not the other way round)

class MpiEnv {
 public:
  /// Initialises MPI (argc/argv may be null), asking for `requested_thread_level` (tests
  /// pass MPI_THREAD_SERIALIZED to exercise the serialised path), and gathers every rank's
  /// host name. Bounded by $TUPE_STARTUP_TIMEOUT_S (dist/startup.h): a rank that has not
  /// joined by then ends the job in one line. Throws tupe::Error when MPI is already
  /// initialised or grants less than MPI_THREAD_SERIALIZED.
  MpiEnv(int* argc, char*** argv, int requested_thread_level = MPI_THREAD_MULTIPLE);
  /// Finalises MPI (unless something already did).
  ~MpiEnv();
  MpiEnv(const MpiEnv&) = delete;
  MpiEnv& operator=(const MpiEnv&) = delete;

  int rank() const { return rank_; }              ///< rank in MPI_COMM_WORLD, 0..world_size-1
  int world_size() const { return world_size_; }  ///< number of ranks W
  /// Rank among the ranks on this node (MPI_Comm_split_type MPI_COMM_TYPE_SHARED), not from
  /// launcher variables.
  int local_rank() const { return local_rank_; }
  int local_world_size() const { return local_world_size_; }  ///< ranks on this node
  const std::string& host_name() const { return hosts_[static_cast<size_t>(rank_)]; }
  /// Every rank's host name, by rank (gathered at start-up).
  const std::vector<std::string>& hosts() const { return hosts_; }
  /// MPI_THREAD_SERIALIZED or MPI_THREAD_MULTIPLE.
  int thread_level() const { return thread_level_; }
  bool thread_multiple() const { return thread_level_ >= MPI_THREAD_MULTIPLE; }

  /// A lock to hold around one MPI call: locks a mutex when MPI is only SERIALIZED, an
  /// empty (unlocked) lock under MPI_THREAD_MULTIPLE.
  std::unique_lock<std::mutex> lock() const;

  /// Prints "tupe: <message>" as one line to stderr (the message names the rank; nothing
  /// when it is empty: the caller printed its error through common/log.h), runs
  /// `before_exit` (if set; e.g. aborting an NCCL communicator so no kernel keeps waiting on
  /// a peer) and ends the whole job with MPI_Abort(MPI_COMM_WORLD, exit_code). Callable from
  /// any thread (the watchdog).
  // --- the bounded start-up (dist/startup.h) ---
  /// The limit of every start-up phase from now on, in seconds (0: unbounded); a job sets it
  /// from dist.startup_timeout_s once its config is read (until then: $TUPE_STARTUP_TIMEOUT_S).
  void set_startup_timeout(double seconds) const { startup_timeout_s_.store(seconds); }
  double startup_timeout_s() const { return startup_timeout_s_.load(); }
  /// The job's work begins: later StartupPhases are no-ops (waits on slower ranks are then
  /// the work's own, bounded by the collective watchdog where there is one).
  void end_startup() const;
  bool in_startup() const { return in_startup_.load(); }
  /// The communicator of the start-up arrival messages (a duplicate of MPI_COMM_WORLD).
  MPI_Comm arrival_comm() const { return arrival_comm_; }
  /// 0, 1, 2, ...: the sequence number of the next start-up phase (the same on every rank).
  int64_t next_startup_sequence() const { return startup_sequence_++; }
  StartupWatch& startup_watch() const { return *watch_; }

  [[noreturn]] void abort(const std::string& message, int exit_code = 1,
                          const std::function<void()>& before_exit = {}) const;

 private:
  int rank_ = 0, world_size_ = 1, local_rank_ = 0, local_world_size_ = 1;
  int thread_level_ = MPI_THREAD_SINGLE;
  std::vector<std::string> hosts_;
  MPI_Comm arrival_comm_ = MPI_COMM_NULL;
  // Start-up state: set by the job through the const interface the job layers hold.
  mutable std::atomic<double> startup_timeout_s_{0};
  mutable std::atomic<bool> in_startup_{true};
  mutable std::atomic<bool> work_stall_done_{false};  ///< the test hook fires once
  mutable int64_t startup_sequence_ = 0;  ///< main thread only
  std::atomic<bool> mpi_up_{false};       ///< MPI_Init_thread returned (the watch may call MPI_Abort)
  std::unique_ptr<StartupWatch> watch_;   ///< started before MPI_Init_thread
  mutable std::mutex mpi_mutex_;  ///< serialises MPI calls under MPI_THREAD_SERIALIZED
};

}  // namespace tupe::dist
