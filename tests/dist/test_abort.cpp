// Failure paths of the communication layer in one process ("Failure paths" in
// dist/communicator.h): the shared BackendLifetime, a collective whose bounded wait times
// out inside a DDP gradient hook (the stand-in backend of tests/dist/fault_backends.h frees
// its handle on abort, as ncclCommAbort does), a Work whose wait reports an error, and MPI
// handles that must not wait while an exception unwinds. Runs under AddressSanitizer too
// (launch/sanitize.sh asan): a use of the aborted handle is then a reported error.
// Its own main(): one MPI environment (a singleton job) for the whole process.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "dist/context.h"
#include "dist/ddp.h"
#include "dist/mpi_work.h"
#include "tests/dist/ddp_test_model.h"
#include "tests/dist/fault_backends.h"

namespace tupe::dist {
namespace {

using namespace faulttest;  // NOLINT: the test backends

/// The process's MPI environment (a singleton job), created by main().
std::unique_ptr<MpiEnv>& env_slot() {
  static std::unique_ptr<MpiEnv> env;
  return env;
}
const MpiEnv& env() { return *env_slot(); }

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// ---- BackendLifetime ----------------------------------------------------------------------

TEST(DistBackendLifetime, AbortRunsTheActionOnceAndStopsCalls) {
  BackendLifetime life;
  int aborted = 0, calls = 0;
  life.set_abort_action([&] { ++aborted; });
  EXPECT_TRUE(life.while_alive([&] { ++calls; }));
  EXPECT_TRUE(life.abort());
  EXPECT_FALSE(life.abort());
  EXPECT_FALSE(life.while_alive([&] { ++calls; }));
  EXPECT_FALSE(life.close([&] { ++aborted; }));
  EXPECT_EQ(aborted, 1);
  EXPECT_EQ(calls, 1);
  EXPECT_TRUE(life.ended());
  EXPECT_TRUE(life.aborted());
}

TEST(DistBackendLifetime, CloseIsNoAbort) {
  BackendLifetime life;
  int aborted = 0, closed = 0;
  life.set_abort_action([&] { ++aborted; });
  EXPECT_TRUE(life.close([&] { ++closed; }));
  EXPECT_FALSE(life.abort());
  EXPECT_EQ(aborted, 0);
  EXPECT_EQ(closed, 1);
  EXPECT_TRUE(life.ended());
  EXPECT_FALSE(life.aborted());
}

TEST(DistBackendLifetime, AbortFromAnotherThreadWaitsForTheCallInProgress) {
  BackendLifetime life;
  std::atomic<bool> in_call{false}, call_done{false}, action_saw_call_done{false};
  life.set_abort_action([&] { action_saw_call_done = call_done.load(); });
  std::thread caller([&] {
    life.while_alive([&] {
      in_call = true;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      call_done = true;
    });
  });
  while (!in_call) std::this_thread::yield();
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE(life.abort());
  EXPECT_GE(seconds_since(t0), 0.1);  // it waited for the call
  caller.join();
  EXPECT_TRUE(action_saw_call_done.load()) << "the abort action ran while a backend call was in progress";
}

TEST(DistBackendLifetime, ParkedLeftoversStayAlive) {
  std::weak_ptr<int> watch;
  {
    BackendLifetime life;
    auto leftover = std::make_shared<int>(7);
    watch = leftover;
    life.park(leftover);
    leftover.reset();
    EXPECT_EQ(life.parked(), 1u);
    EXPECT_FALSE(watch.expired());
  }
  EXPECT_FALSE(watch.expired()) << "parked buffers must outlive the lifetime (MPI may still write into them)";
}

// ---- A timed-out wait inside the DDP hook ----------------------------------------------------

struct Job {
  std::shared_ptr<HandleLog> log = std::make_shared<HandleLog>();
  StallingCommunicator* backend = nullptr;
};

/// A DistContext over the stalling backend; `stall_at` counts all-reduce launches.
std::unique_ptr<DistContext> make_context(Job& job, int64_t stall_at, bool fail_in_wait, double timeout_s = 30) {
  DistOptions options;
  options.backend = BackendKind::kMpi;
  options.timeout_s = timeout_s;
  options.bucket_size_bytes = 64;  // every parameter its own bucket: several launches per backward
  return std::make_unique<DistContext>(
      env(), options, c10::Device(c10::kCPU), [&job, stall_at, fail_in_wait](const MpiEnv& e, const DistOptions& o,
                                                                              Watchdog* w) {
        auto comm = std::make_unique<StallingCommunicator>(e, o, w, job.log, stall_at, 0.2, fail_in_wait);
        job.backend = comm.get();
        return comm;
      });
}

/// One DDP step; the backend stalls at its third launch (inside backward's hooks).
void train_until_the_stall(Job& job, int64_t stall_at, bool fail_in_wait) {
  auto context = make_context(job, stall_at, fail_in_wait);
  mpitest::Net net(false, false);
  mpitest::init_params(*net, 1);
  DistributedDataParallel ddp(context->comm(), mpitest::named_params(*net), context->options());
  for (int step = 0; step < 3; ++step) {
    context->comm().set_step(step);
    ddp.begin_step();
    auto [x, y] = mpitest::batch(5, 0, step);
    ddp.prepare_for_backward(true);
    mpitest::loss(net, x, y).backward();
    ddp.finish_grad_sync();
  }
}

TEST(DistAbort, TimedOutWaitInsideTheDdpHookReachesTheTopWithTheTimeoutLine) {
  Job job;
  const auto t0 = std::chrono::steady_clock::now();
  std::string message;
  try {
    // The exception leaves a scope holding the DDP object and the DistContext: both are
    // destroyed while it unwinds.
    train_until_the_stall(job, /*stall_at=*/2, /*fail_in_wait=*/false);
  } catch (const Error& e) {
    message = e.what();
  }
  EXPECT_NE(message.find("did not finish within 0.2 s (dist.timeout_s) at step 0"), std::string::npos) << message;
  EXPECT_NE(message.find("all_reduce 'all_reduce grad bucket"), std::string::npos) << message;
  EXPECT_EQ(job.log->frees.load(), 1);
  EXPECT_GT(job.log->calls.load(), 0);
  EXPECT_EQ(job.log->calls_after_abort.load(), 0) << "the aborted handle was used again";
  EXPECT_LT(seconds_since(t0), 10.0);
}

TEST(DistAbort, DestroyingAfterTheErrorWasCaughtTouchesNothing) {
  Job job;
  auto context = make_context(job, /*stall_at=*/1, /*fail_in_wait=*/false);
  std::string message;
  {
    mpitest::Net net(false, false);
    mpitest::init_params(*net, 1);
    DistributedDataParallel ddp(context->comm(), mpitest::named_params(*net), context->options());
    ddp.begin_step();
    ddp.prepare_for_backward(true);
    auto [x, y] = mpitest::batch(5, 0, 0);
    try {
      mpitest::loss(net, x, y).backward();
    } catch (const Error& e) {
      message = e.what();
    }
    EXPECT_TRUE(context->comm().aborted());
    // Later use fails loudly instead of touching the freed handle.
    EXPECT_THROW(ddp.finish_grad_sync(), Error);
    at::Tensor t = at::ones({4});
    EXPECT_THROW(context->comm().all_reduce({t}, "after abort"), Error);
  }  // DDP destroyed normally, with the bucket launched before the stall still held
  context.reset();
  EXPECT_NE(message.find("did not finish within"), std::string::npos) << message;
  EXPECT_EQ(job.log->frees.load(), 1);
  EXPECT_EQ(job.log->calls_after_abort.load(), 0);
}

TEST(DistAbort, AWaitThatReportsAnErrorAbortsAndLaterWaitsDoNotTouchTheHandle) {
  Job job;
  std::string message;
  try {
    train_until_the_stall(job, /*stall_at=*/1, /*fail_in_wait=*/true);
  } catch (const Error& e) {
    message = e.what();
  }
  EXPECT_NE(message.find("asynchronous error"), std::string::npos) << message;
  EXPECT_EQ(job.log->frees.load(), 1);
  EXPECT_EQ(job.log->calls_after_abort.load(), 0);
}

TEST(DistAbort, OrderlyShutdownClosesWithoutAbort) {
  Job job;
  train_until_the_stall(job, /*stall_at=*/1000, /*fail_in_wait=*/false);  // never stalls
  EXPECT_EQ(job.log->frees.load(), 1);  // close() frees the handle once, like an abort
  EXPECT_EQ(job.log->calls_after_abort.load(), 0);
}

// ---- MPI handles ----------------------------------------------------------------------------

/// A receive from this very rank that nothing will ever match: a request that never completes.
MPI_Request never_completing(MPI_Comm comm, int* buffer) {
  MPI_Request request = MPI_REQUEST_NULL;
  EXPECT_EQ(MPI_Irecv(buffer, 1, MPI_INT, 0, /*tag=*/4711, comm, &request), MPI_SUCCESS);
  return request;
}

TEST(DistAbortMpi, HandleDestroyedWhileUnwindingParksInsteadOfWaiting) {
  auto life = std::make_shared<BackendLifetime>();
  int buffer = 0, value = 1;
  at::Tensor lent = at::zeros({16});
  const auto t0 = std::chrono::steady_clock::now();
  try {
    auto work = std::make_shared<MpiWork>(env(), life, std::vector<at::Tensor>{lent});
    work->add_request(never_completing(MPI_COMM_SELF, &buffer));
    EXPECT_FALSE(work->test());
    throw Error("some rank's own error");
  } catch (const Error&) {
  }
  EXPECT_LT(seconds_since(t0), 5.0);
  EXPECT_EQ(life->parked(), 1u);
  EXPECT_GE(lent.use_count(), 2) << "the parked request's buffer must stay alive";
  // Let the request complete before MPI_Finalize (a send that matches it).
  EXPECT_EQ(MPI_Send(&value, 1, MPI_INT, 0, 4711, MPI_COMM_SELF), MPI_SUCCESS);
}

TEST(DistAbortMpi, WaitAfterAbortThrowsAndDestructionDoesNotBlock) {
  auto life = std::make_shared<BackendLifetime>();
  int buffer = 0, value = 1;
  auto work = std::make_shared<MpiWork>(env(), life, std::vector<at::Tensor>{});
  work->add_request(never_completing(MPI_COMM_SELF, &buffer));
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    life->abort();
  });
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_THROW(work->wait(), Error);  // would spin forever without the abort
  aborter.join();
  EXPECT_LT(seconds_since(t0), 5.0);
  EXPECT_TRUE(work->test());  // nothing more will come
  work.reset();
  EXPECT_EQ(life->parked(), 1u);
  EXPECT_EQ(MPI_Send(&value, 1, MPI_INT, 0, 4711, MPI_COMM_SELF), MPI_SUCCESS);
}

}  // namespace
}  // namespace tupe::dist

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  tupe::dist::env_slot() = std::make_unique<tupe::dist::MpiEnv>(&argc, &argv);
  const int rc = RUN_ALL_TESTS();
  tupe::dist::env_slot().reset();
  return rc;
}
