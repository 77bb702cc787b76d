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

#include <functional>
#include <mutex>
#include <string>

namespace tupe::dist {

class MpiEnv {
 public:
  /// Initialises MPI (argc/argv may be null), asking for `requested_thread_level` (tests
  /// pass MPI_THREAD_SERIALIZED to exercise the serialised path). Throws tupe::Error when
  /// MPI is already initialised or grants less than MPI_THREAD_SERIALIZED.
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
  const std::string& host_name() const { return host_name_; }
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
  [[noreturn]] void abort(const std::string& message, int exit_code = 1,
                          const std::function<void()>& before_exit = {}) const;

 private:
  int rank_ = 0, world_size_ = 1, local_rank_ = 0, local_world_size_ = 1;
  int thread_level_ = MPI_THREAD_SINGLE;
  std::string host_name_;
  mutable std::mutex mpi_mutex_;  ///< serialises MPI calls under MPI_THREAD_SERIALIZED
};

}  // namespace tupe::dist
