#include "dist/context.h"

namespace tupe::dist {

DistContext::DistContext(const MpiEnv& env, const DistOptions& options, const c10::Device& device)
    : env_(env), options_(options), device_(device) {
  options_.validate();
  if (options_.timeout_s > 0)
    watchdog_ = std::make_unique<Watchdog>(env.rank(), options_.timeout_s, [this](const std::string& message) {
      // The watchdog thread: print the message, abort the communicator (an NCCL kernel
      // waiting on a lost peer would otherwise spin on), then end the job.
      Communicator* comm = abort_target_.load();
      env_.abort(message, 1, [comm] {
        if (comm != nullptr) comm->abort_backend();
      });
    }, std::chrono::milliseconds(0), device_);
  comm_ = make_communicator(env, options_, watchdog_.get(), device_);
  abort_target_.store(comm_.get());
}

DistContext::~DistContext() {
  abort_target_.store(nullptr);
  comm_.reset();
  watchdog_.reset();
}

}  // namespace tupe::dist
