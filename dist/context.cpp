#include "dist/context.h"

#include "dist/make_communicator.h"
#include "dist/startup.h"

#include "common/error.h"

namespace tupe::dist {

DistContext::DistContext(const MpiEnv& env, const DistOptions& options, const c10::Device& device)
    : DistContext(env, options, device, [&device](const MpiEnv& e, const DistOptions& o, Watchdog* w) {
        return make_communicator(e, o, w, device);
      }) {}

DistContext::DistContext(const MpiEnv& env, const DistOptions& options, const c10::Device& device,
                         const CommunicatorFactory& make)
    : env_(env), options_(options), device_(device) {
  options_.validate();
  if (options_.timeout_s > 0)
    watchdog_ = std::make_unique<Watchdog>(env.rank(), options_.timeout_s, [this](const std::string& message) {
      // The watchdog thread: print the message, abort the communicator (an NCCL kernel
      // waiting on a lost peer would otherwise spin on), then end the job.
      env_.abort(message, 1, [lifetime = lifetime_] {
        if (lifetime) lifetime->abort();
      });
    }, std::chrono::milliseconds(0), device_);
  {
    const StartupPhase bounded(env, "communicator");  // MPI_Comm_dup; NCCL's id broadcast and init
    comm_ = make(env, options_, watchdog_.get());
  }
  TUPE_CHECK(comm_ != nullptr, "DistContext: the communicator factory returned nothing");
  lifetime_ = comm_->lifetime();
}

DistContext::~DistContext() {
  if (comm_ && unwinding_since(uncaught_at_start_)) comm_->abort_backend();
  comm_.reset();
  watchdog_.reset();
}

}  // namespace tupe::dist
