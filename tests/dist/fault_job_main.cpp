// Failure jobs for tests/dist/check_fault_job.cmake: a small DDP training loop run the way
// every `tupe` subcommand runs a job on its ranks (cli/rank_guard.h), over the stand-in
// backends of tests/dist/fault_backends.h.
//   dist_fault_job lone      (2+ ranks, finalizing backend) rank 1 throws its own error in
//                            the forward of step 3 while rank 0 goes on into the step's
//                            all-reduces; the job must end within seconds with rank 1's
//                            error, not after the backend's bounded shutdown wait (60 s)
//                            nor the peers' watchdog (600 s).
//   dist_fault_job timeout   (1 rank, stalling backend) the third all-reduce launch, inside
//                            backward's gradient hooks, times out (0.5 s): the rank must end
//                            with the timeout line and exit code 1, not a crash.
#include <cstdio>
#include <string>

#include "cli/rank_guard.h"
#include "common/error.h"
#include "common/log.h"
#include "dist/context.h"
#include "dist/ddp.h"
#include "tests/dist/ddp_test_model.h"
#include "tests/dist/fault_backends.h"

namespace {

using namespace tupe;
using namespace tupe::dist;

int train(const MpiEnv& env, const std::string& mode) {
  DistOptions options;
  options.backend = BackendKind::kMpi;
  options.bucket_size_bytes = 64;
  options.timeout_s = mode == "lone" ? 600 : 30;  // the peers' watchdog: far beyond the test's limit
  auto log = std::make_shared<faulttest::HandleLog>();
  DistContext context(env, options, c10::Device(c10::kCPU),
                      [&](const MpiEnv& e, const DistOptions& o, Watchdog* w) -> std::unique_ptr<Communicator> {
                        if (mode == "lone") {
                          DistOptions shutdown = o;
                          shutdown.timeout_s = 60;  // its orderly shutdown waits up to a minute for peers
                          return std::make_unique<faulttest::FinalizingCommunicator>(e, shutdown, w);
                        }
                        return std::make_unique<faulttest::StallingCommunicator>(e, o, w, log, /*stall_at=*/2, 0.5,
                                                                                 /*fail_in_wait=*/false);
                      });
  mpitest::Net net(false, false);
  mpitest::init_params(*net, 1);
  DistributedDataParallel ddp(context.comm(), mpitest::named_params(*net), context.options());
  for (int64_t step = 0; step < 6; ++step) {
    context.comm().set_step(step);
    ddp.begin_step();
    auto [x, y] = mpitest::batch(5, env.rank(), step);
    if (mode == "lone" && step == 3 && env.rank() == 1)
      TUPE_FAIL("injected failure: rank 1 fails alone in the forward of step 3");
    ddp.prepare_for_backward(true);
    mpitest::loss(net, x, y).backward();
    ddp.finish_grad_sync();
    if (env.rank() == 0) std::printf("step %lld done\n", static_cast<long long>(step));
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode != "lone" && mode != "timeout") {
    std::fprintf(stderr, "usage: dist_fault_job lone|timeout\n");
    return 2;
  }
  try {
    MpiEnv env(&argc, &argv);
    return cli::run_job_on_ranks(env, "fault-job", [&] { return train(env, mode); });
  } catch (const std::exception& e) {
    // One rank: the error comes here, as it reaches tupe's main().
    log::error("fault-job", "error", cli::one_line(e.what()), false);
    return 1;
  }
}
