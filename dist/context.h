// The data-parallel context of one job: the watchdog (when dist.timeout_s > 0) and the
// communicator, built on an MpiEnv in that order and destroyed in reverse. What the
// trainer holds; DistributedDataParallel objects built on comm() must be destroyed first.
//
//   tupe::dist::MpiEnv env(&argc, &argv);                       // once, in main()
//   const c10::Device device = tupe::dist::resolve_device(env, request, "train.device");
//   tupe::dist::DistContext dist(env, options, device);
//   dist.comm().set_step(step);                                 // each step (watchdog, logs)
#pragma once
#include <c10/core/Device.h>

#include <exception>
#include <functional>
#include <memory>

#include "dist/communicator.h"
#include "dist/mpi_env.h"
#include "dist/options.h"
#include "dist/watchdog.h"

namespace tupe::dist {

class DistContext {
 public:
  /// Validates `options`, starts the watchdog unless options.timeout_s == 0 (a timed-out
  /// collective aborts the communicator, then the job, through env.abort) and creates the
  /// communicator for `device` (from dist::resolve_device: cuda:<index> or cpu).
  /// Collective: every rank constructs it. Throws tupe::Error.
  DistContext(const MpiEnv& env, const DistOptions& options, const c10::Device& device);
  /// Builds the communicator with `make` instead of make_communicator (tests: a backend
  /// whose waits fail or time out). Same contract otherwise.
  using CommunicatorFactory =
      std::function<std::unique_ptr<Communicator>(const MpiEnv&, const DistOptions&, Watchdog*)>;
  DistContext(const MpiEnv& env, const DistOptions& options, const c10::Device& device,
              const CommunicatorFactory& make);
  /// Destroys the communicator, then the watchdog. While an exception unwinds it aborts the
  /// communicator first (no finalize that would wait for peers: "Failure paths" in
  /// dist/communicator.h).
  ~DistContext();
  DistContext(const DistContext&) = delete;
  DistContext& operator=(const DistContext&) = delete;

  const MpiEnv& env() const { return env_; }
  const DistOptions& options() const { return options_; }
  /// The device of this rank's tensors: cuda:<index> or cpu.
  const c10::Device& device() const { return device_; }
  Communicator& comm() { return *comm_; }
  /// Null when the watchdog is off (timeout_s == 0).
  Watchdog* watchdog() { return watchdog_.get(); }

 private:
  const MpiEnv& env_;
  const DistOptions options_;
  const c10::Device device_;
  const int uncaught_at_start_ = std::uncaught_exceptions();  ///< for unwinding_since()
  std::unique_ptr<Watchdog> watchdog_;  ///< declared before comm_: outlives it
  std::unique_ptr<Communicator> comm_;
  /// comm_'s lifetime, what the watchdog thread aborts (set before any collective is
  /// registered with the watchdog, whose lock orders it; outlives the watchdog).
  std::shared_ptr<BackendLifetime> lifetime_;
};

}  // namespace tupe::dist
