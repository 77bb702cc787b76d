#include "dist/context.h"

namespace tupe::dist {

namespace {
c10::Device device_of(const MpiEnv& env, bool use_cuda) {
  if (!use_cuda) return c10::Device(c10::kCPU);
  return c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(env.device_index()));
}
}  // namespace

DistContext::DistContext(const MpiEnv& env, const DistOptions& options, bool use_cuda)
    : env_(env), options_(options), device_(device_of(env, use_cuda)) {
  options_.validate();
  if (options_.timeout_s > 0)
    watchdog_ = std::make_unique<Watchdog>(env.rank(), options_.timeout_s,
                                           [&env](const std::string& message) { env.abort(message); });
  comm_ = make_communicator(env, options_, watchdog_.get(), device_);
}

DistContext::~DistContext() {
  comm_.reset();
  watchdog_.reset();
}

}  // namespace tupe::dist
