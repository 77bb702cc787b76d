// Communicator backends for the failure-path tests (tests/dist/test_abort.cpp and
// tests/dist/fault_job_main.cpp), standing in for NCCL where the machine has no GPU:
//
// - StallingCommunicator: a device-like backend over a fake communicator handle that the
//   abort frees (like ncclCommAbort). Its collectives complete at once on one rank (sum of
//   one = the tensor itself), except the `stall_at`-th all-reduce launch, whose bounded wait
//   never sees completion: after `wait_limit_s` it aborts and throws the timeout line, as
//   the NCCL backend's await does. With fail_in_wait, that collective is launched and its
//   Work's wait() reports an asynchronous error instead (ncclCommGetAsyncError's case).
//   Every use of the handle after the abort is counted (and, under AddressSanitizer, the
//   freed handle is poisoned, so a touch is also a reported use-after-free).
// - FinalizingCommunicator: MPI collectives (float32 sum) whose orderly shutdown waits for
//   every rank, as ncclCommFinalize does, bounded by dist.timeout_s; an aborted one does not
//   wait.
#pragma once
#include <ATen/ATen.h>
#include <mpi.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <sstream>
#include <string>
#include <thread>

#include "dist/check.h"
#include "dist/communicator.h"
#include "dist/mpi_env.h"
#include "dist/mpi_work.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define TUPE_TEST_POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define TUPE_TEST_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define TUPE_TEST_POISON(p, n) ((void)(p), (void)(n))
#define TUPE_TEST_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

namespace tupe::dist::faulttest {

/// What the tests read after the fact (outlives the backend).
struct HandleLog {
  std::atomic<int64_t> calls{0};              ///< uses of the handle while it was alive
  std::atomic<int64_t> calls_after_abort{0};  ///< uses after the abort freed it: must stay 0
  std::atomic<int64_t> frees{0};               ///< by the abort or the orderly close
};

/// The fake device communicator (what ncclComm_t points to).
struct FakeDeviceComm {
  explicit FakeDeviceComm(std::shared_ptr<HandleLog> l) : log(std::move(l)) {}
  void touch() {
    if (freed) {
      log->calls_after_abort.fetch_add(1);
    } else {
      log->calls.fetch_add(1);
    }
  }
  std::shared_ptr<HandleLog> log;
  bool freed = false;
  char payload[64] = {};  ///< what ASan poisons once freed
};

/// Frees the fake handle the way ncclCommAbort frees a communicator: later touches count
/// (the object itself is kept, so counting is not undefined behaviour) and, under ASan, its
/// payload is poisoned.
inline void free_fake_comm(FakeDeviceComm* comm) {
  comm->freed = true;
  comm->log->frees.fetch_add(1);
  TUPE_TEST_POISON(comm->payload, sizeof(comm->payload));
}

class StallingWork final : public Work {
 public:
  StallingWork(FakeDeviceComm* comm, std::shared_ptr<BackendLifetime> lifetime, bool fail_in_wait, int rank)
      : comm_(comm), lifetime_(std::move(lifetime)), fail_in_wait_(fail_in_wait), rank_(rank) {}

 protected:
  void do_wait() override {
    const bool alive = lifetime_->while_alive([&] { use_handle(); });
    TUPE_CHECK(alive, "stalling backend: rank " << rank_ << ": a collective's wait: the communicator was aborted");
    if (fail_in_wait_) {
      lifetime_->abort();
      TUPE_FAIL("stalling backend: rank " << rank_ << ": asynchronous error: remote process exited or there was a "
                                                      "network error");
    }
  }
  bool query() override {
    if (lifetime_->ended()) return true;
    lifetime_->while_alive([&] { use_handle(); });
    return true;
  }
  std::function<bool()> make_probe() override {
    return [] { return true; };  // completes at once (one rank)
  }

 private:
  /// What a real handle's wait does with the communicator (ncclCommGetAsyncError).
  void use_handle() {
    comm_->touch();
    comm_->payload[0] = static_cast<char>(comm_->payload[0] + 1);
  }

  FakeDeviceComm* comm_;
  std::shared_ptr<BackendLifetime> lifetime_;
  bool fail_in_wait_;
  int rank_;
};

class StallingCommunicator final : public Communicator {
 public:
  /// stall_at: 0-based index of the all-reduce launch that stalls (or, with fail_in_wait,
  /// whose wait fails); wait_limit_s: the bounded wait's limit (seconds).
  StallingCommunicator(const MpiEnv& env, const DistOptions& options, Watchdog* watchdog,
                       std::shared_ptr<HandleLog> log, int64_t stall_at, double wait_limit_s, bool fail_in_wait)
      : Communicator(env, options, watchdog),
        comm_(std::make_unique<FakeDeviceComm>(std::move(log))),
        stall_at_(stall_at),
        wait_limit_s_(wait_limit_s),
        fail_in_wait_(fail_in_wait) {
    TUPE_CHECK(env.world_size() == 1, "stalling backend: one rank only (its collectives are local)");
    lifetime()->set_abort_action([comm = comm_.get()] { free_fake_comm(comm); });
  }
  ~StallingCommunicator() override {
    if (!lifetime()->ended()) lifetime()->close([comm = comm_.get()] { free_fake_comm(comm); });
    TUPE_TEST_UNPOISON(comm_->payload, sizeof(comm_->payload));
  }
  const char* backend_name() const override { return "stalling"; }
  int64_t launches() const { return launches_; }

 protected:
  WorkPtr launch_all_reduce(const std::vector<at::Tensor>& tensors, const std::string& name) override {
    const int64_t index = launches_++;
    if (index == stall_at_ && !fail_in_wait_) {
      // The bounded wait of a launch that never completes (the NCCL backend's await).
      const auto start = std::chrono::steady_clock::now();
      for (;;) {
        TUPE_CHECK(lifetime()->while_alive([&] { comm_->touch(); }),
                   "stalling backend: all_reduce '" << name << "': the communicator was aborted while waiting");
        if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > wait_limit_s_) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
      abort_backend();
      std::ostringstream limit;
      limit << wait_limit_s_;
      TUPE_FAIL("stalling backend: rank " << rank() << ": all_reduce '" << name << "' did not finish within "
                                          << limit.str() << " s (dist.timeout_s) at step " << step()
                                          << "; the communicator was aborted");
    }
    lifetime()->while_alive([&] { comm_->touch(); });
    (void)tensors;  // one rank: the sum over ranks is the tensor itself
    return std::make_shared<StallingWork>(comm_.get(), lifetime(), fail_in_wait_ && index == stall_at_, rank());
  }
  WorkPtr launch_broadcast(const std::vector<at::Tensor>& /*tensors*/, int /*root*/, const std::string& /*name*/) override {
    return std::make_shared<StallingWork>(comm_.get(), lifetime(), false, rank());
  }

 private:
  std::unique_ptr<FakeDeviceComm> comm_;
  const int64_t stall_at_;
  const double wait_limit_s_;
  const bool fail_in_wait_;
  int64_t launches_ = 0;
};

class FinalizingCommunicator final : public Communicator {
 public:
  FinalizingCommunicator(const MpiEnv& env, const DistOptions& options, Watchdog* watchdog)
      : Communicator(env, options, watchdog) {
    auto mpi = env.lock();
    TUPE_MPI_CHECK(MPI_Comm_dup(host_comm(), &shutdown_comm_));
  }
  /// The orderly shutdown waits until every rank shut down too (bounded by
  /// dist.timeout_s), unless the backend was aborted. (On a communicator of its own: on the
  /// collectives' one, a barrier would be matched against a peer's pending all-reduce.)
  ~FinalizingCommunicator() override {
    if (lifetime()->ended()) return;
    MPI_Request request = MPI_REQUEST_NULL;
    {
      auto mpi = env().lock();
      if (MPI_Ibarrier(shutdown_comm_, &request) != MPI_SUCCESS) return;
    }
    const auto start = std::chrono::steady_clock::now();
    for (;;) {
      int done = 0;
      {
        auto mpi = env().lock();
        if (MPI_Test(&request, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) return;
      }
      if (done) break;
      if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > options().timeout_s) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    lifetime()->close({});
  }
  const char* backend_name() const override { return "finalizing"; }

 protected:
  WorkPtr launch_all_reduce(const std::vector<at::Tensor>& tensors, const std::string& /*name*/) override {
    auto work = std::make_shared<MpiWork>(env(), lifetime(), tensors);
    auto mpi = env().lock();
    for (const at::Tensor& t : tensors) {
      TUPE_CHECK(t.is_cpu() && t.is_contiguous() && t.scalar_type() == at::kFloat,
                 "finalizing backend: float32 contiguous CPU tensors only");
      MPI_Request request = MPI_REQUEST_NULL;
      TUPE_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, t.data_ptr(), static_cast<int>(t.numel()), MPI_FLOAT, MPI_SUM,
                                    host_comm(), &request));
      work->add_request(request);
    }
    return work;
  }
  WorkPtr launch_broadcast(const std::vector<at::Tensor>& /*tensors*/, int /*root*/, const std::string& /*name*/) override {
    TUPE_FAIL("finalizing backend: broadcast is not needed by the tests");
  }

 private:
  MPI_Comm shutdown_comm_ = MPI_COMM_NULL;  ///< the shutdown barrier's (left to MPI_Finalize)
};

}  // namespace tupe::dist::faulttest
