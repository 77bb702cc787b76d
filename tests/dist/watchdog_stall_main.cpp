// Fault-injection job for the watchdog test (tests/dist/check_watchdog_stall.cmake):
// 2 ranks all-reduce once per step; DistOptions given as key=value arguments, and the
// test-only stall from the environment (dist/stall_injection.h), e.g.
//   TUPE_TEST_STALL=rank=1,step=3 watchdog_stall timeout_s=2
// make rank 1 sleep before its collective of step 3. Rank 0's watchdog must then end the
// whole job (MPI_Abort) with one line naming the rank, the step and the collective.
// Without a stall the job finishes and exits 0.
#include <ATen/ATen.h>

#include <cstdio>
#include <iostream>

#include "dist/context.h"

int main(int argc, char** argv) {
  using namespace tupe::dist;
  MpiEnv env(&argc, &argv);
  try {
    DistOptions options;
    tupe::KeyValues kv;
    for (int i = 1; i < argc; ++i) {
      const std::string arg = argv[i];
      const size_t eq = arg.find('=');
      TUPE_CHECK(eq != std::string::npos, "watchdog_stall: argument '" << arg << "' is not key=value");
      kv[arg.substr(0, eq)] = arg.substr(eq + 1);
    }
    DistOptions::fields().apply(options, kv, "watchdog_stall arguments");
    options.validate();
    TUPE_CHECK(options.timeout_s > 0, "watchdog_stall: needs timeout_s > 0");
    DistContext dist(env, options, c10::Device(c10::kCPU));
    Communicator& comm = dist.comm();
    for (int64_t step = 0; step < 6; ++step) {
      comm.set_step(step);
      at::Tensor x = at::full({1000}, static_cast<float>(env.rank() + 1));
      comm.all_reduce({x}, "stall-test all_reduce")->wait();
      const float want = env.world_size() * (env.world_size() + 1) / 2.0f;
      TUPE_CHECK(x.eq(want).all().item<bool>(), "watchdog_stall: wrong sum at step " << step);
      if (env.rank() == 0) std::printf("step %lld done\n", static_cast<long long>(step));
      std::fflush(stdout);
    }
  } catch (const std::exception& e) {
    std::cerr << "watchdog_stall: rank " << env.rank() << ": error: " << e.what() << "\n";
    env.abort("watchdog_stall failed", 2);
  }
  return 0;
}
