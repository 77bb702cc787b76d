// The communicator interface: collectives over lists of tensors that return async Work
// handles, with two backends (dist/mpi_communicator.h on CPU, dist/nccl_communicator.h on
// GPU) chosen by make_communicator() (dist/make_communicator.h). Modelled on c10d's Backend.hpp: every collective
// returns a Work; an operation or dtype a backend lacks fails loudly naming the backend.
//
// Contracts:
// - all_reduce sums IN PLACE (each tensor ends as the elementwise sum over ranks).
// - broadcast overwrites every rank's tensors with the root's, in place.
// - Every rank calls the same collectives in the same order (MPI/NCCL rule).
// - Tensors must stay alive and untouched until wait() (the Work also keeps a reference).
// - Every collective is registered with the watchdog (if any) under (name, step).
//
// Failure paths (the order that lets a failing rank say why before the job ends):
// - The communicator and its Work handles share one BackendLifetime
//   (dist/backend_lifetime.h). abort_backend() ends it; afterwards no handle touches the
//   backend again: wait() throws "... the communicator was aborted", test() answers true,
//   destructors do nothing that waits (MPI handles park their buffers instead).
// - Destruction while an exception unwinds aborts instead of finishing in order: the
//   DistContext aborts its communicator (NCCL: ncclCommAbort, not ncclCommFinalize, which
//   would wait for peers sitting in collectives), DistributedDataParallel does not wait for
//   buckets in flight, and MPI handles do not wait for their requests. So the rank reaches
//   cli/rank_guard.h, which prints its error and ends the job, within moments.
#pragma once
#include <ATen/core/Tensor.h>
#include <mpi.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "dist/backend_lifetime.h"
#include "dist/options.h"
#include "dist/stall_injection.h"

namespace tupe::dist {

class MpiEnv;
class Watchdog;

/// Handle of one launched collective.
class Work {
 public:
  virtual ~Work();
  /// MPI: blocks until the collective is complete. NCCL: makes the caller's current CUDA
  /// stream wait for it (no host sync). Idempotent. Throws tupe::Error on a backend error.
  void wait();
  /// Non-blocking host query: true once the collective has completed (drives MPI progress).
  bool test();

 protected:
  virtual void do_wait() = 0;
  /// Thread-safe and non-blocking (may answer false while another thread holds the handle).
  virtual bool query() = 0;
  /// A thread-safe, non-blocking completion probe for the watchdog that stays valid after
  /// this handle is destroyed (MPI handles complete in their destructor; NCCL probes hold
  /// the completion event).
  virtual std::function<bool()> make_probe() = 0;
  /// Records completion and deregisters from the watchdog (once).
  void mark_complete();

 private:
  friend class Communicator;
  Watchdog* watchdog_ = nullptr;  ///< set by Communicator::track
  uint64_t watch_id_ = 0;
  std::atomic<bool> complete_{false};
};
using WorkPtr = std::shared_ptr<Work>;

/// How many collectives of each kind this communicator launched (for tests and logs).
struct CollectiveCounts {
  int64_t all_reduce = 0;
  int64_t broadcast = 0;
  int64_t all_gather = 0;
  int64_t barrier = 0;
};

class Communicator {
 public:
  /// `env` and `watchdog` (may be null: no timeouts) must outlive the communicator.
  Communicator(const MpiEnv& env, const DistOptions& options, Watchdog* watchdog);
  virtual ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  /// "mpi" or "nccl".
  virtual const char* backend_name() const = 0;
  int rank() const;
  int world_size() const;
  const MpiEnv& env() const { return env_; }
  const DistOptions& options() const { return options_; }

  /// The training step that collectives are reported under (watchdog, and the test-only
  /// stall injection of dist/stall_injection.h).
  void set_step(int64_t step) { step_.store(step); }
  int64_t step() const { return step_.load(); }

  /// Sums each tensor elementwise over all ranks, in place. `name` labels it for the
  /// watchdog. Tensors: contiguous, on the backend's device; dtypes per backend.
  WorkPtr all_reduce(const std::vector<at::Tensor>& tensors, const std::string& name);
  /// Overwrites each tensor with rank `root`'s, in place (any dtype; contiguous).
  WorkPtr broadcast(const std::vector<at::Tensor>& tensors, int root, const std::string& name);
  /// Gathers `local` (the same number of bytes on every rank) from all ranks into
  /// `gathered` = [rank 0 bytes | rank 1 bytes | ...], over MPI on the host (both backends;
  /// small buffers for checks). `gathered` is resized now and valid after wait().
  WorkPtr all_gather_host(const std::vector<uint8_t>& local, std::vector<uint8_t>& gathered,
                          const std::string& name);
  /// Completes when every rank has entered it (host-side MPI_Ibarrier, both backends).
  WorkPtr barrier(const std::string& name);

  CollectiveCounts counts() const;

  /// Tears down the backend's device-side state at once, from any thread, without waiting
  /// for peers (NCCL: ncclCommAbort, so kernels stuck on a lost peer end; MPI: the handles
  /// stop waiting). Called by the watchdog just before it ends the job, by a backend whose
  /// wait failed or timed out, and by DistContext when destroyed during an exception. The
  /// communicator is unusable afterwards (collectives throw). Idempotent.
  void abort_backend() noexcept { lifetime_->abort(); }
  /// True once abort_backend() ran (or the backend aborted itself).
  bool aborted() const noexcept { return lifetime_->aborted(); }
  /// The lifetime this communicator's handles share (the watchdog's abort goes through it,
  /// so it never calls into a communicator being destroyed).
  const std::shared_ptr<BackendLifetime>& lifetime() const { return lifetime_; }

 protected:
  /// Backend part of all_reduce/broadcast: validate, launch, return the handle. `name` is
  /// the collective's label (for errors and timeouts).
  virtual WorkPtr launch_all_reduce(const std::vector<at::Tensor>& tensors, const std::string& name) = 0;
  virtual WorkPtr launch_broadcast(const std::vector<at::Tensor>& tensors, int root, const std::string& name) = 0;
  /// This communicator's own duplicate of MPI_COMM_WORLD (MPI_ERRORS_RETURN).
  MPI_Comm host_comm() const { return host_comm_; }
  /// Throws tupe::Error "<backend> backend: rank R: <op> '<name>': the communicator was
  /// aborted ..." once abort_backend() ran (every launch checks it first).
  void check_not_aborted(const char* op, const std::string& name) const;

 private:
  WorkPtr track(WorkPtr work, const std::string& name);
  void maybe_stall(const std::string& name);

  const MpiEnv& env_;
  const DistOptions options_;
  const StallInjection stall_;  ///< test-only, from $TUPE_TEST_STALL (off when unset)
  Watchdog* const watchdog_;
  const std::shared_ptr<BackendLifetime> lifetime_ = std::make_shared<BackendLifetime>();
  MPI_Comm host_comm_ = MPI_COMM_NULL;
  std::atomic<int64_t> step_{0};
  std::atomic<bool> stalled_{false};
  std::atomic<int64_t> n_all_reduce_{0}, n_broadcast_{0}, n_all_gather_{0}, n_barrier_{0};
};

}  // namespace tupe::dist
