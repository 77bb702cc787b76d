// The data-parallel context of one job: the watchdog (when dist.timeout_s > 0) and the
// communicator, built on an MpiEnv in that order and destroyed in reverse. What the
// trainer holds; DistributedDataParallel objects built on comm() must be destroyed first.
//
//   tupe::dist::MpiEnv env(&argc, &argv);                       // once, in main()
//   tupe::dist::DistContext dist(env, options, /*use_cuda=*/true);
//   dist.comm().set_step(step);                                 // each step (watchdog, logs)
#pragma once
#include <c10/core/Device.h>

#include <memory>

#include "dist/communicator.h"
#include "dist/mpi_env.h"
#include "dist/options.h"
#include "dist/watchdog.h"

namespace tupe::dist {

class DistContext {
 public:
  /// Validates `options`, starts the watchdog (aborting through env.abort) unless
  /// options.timeout_s == 0, and creates the communicator for device(): cuda:local_rank when
  /// `use_cuda`, else CPU. Collective: every rank constructs it. Throws tupe::Error.
  DistContext(const MpiEnv& env, const DistOptions& options, bool use_cuda);
  ~DistContext();
  DistContext(const DistContext&) = delete;
  DistContext& operator=(const DistContext&) = delete;

  const MpiEnv& env() const { return env_; }
  const DistOptions& options() const { return options_; }
  /// The device of this rank's tensors: cuda:<local rank> or cpu.
  const c10::Device& device() const { return device_; }
  Communicator& comm() { return *comm_; }
  /// Null when the watchdog is off (timeout_s == 0).
  Watchdog* watchdog() { return watchdog_.get(); }

 private:
  const MpiEnv& env_;
  const DistOptions options_;
  const c10::Device device_;
  std::unique_ptr<Watchdog> watchdog_;  ///< declared before comm_: outlives it
  std::unique_ptr<Communicator> comm_;
};

}  // namespace tupe::dist
