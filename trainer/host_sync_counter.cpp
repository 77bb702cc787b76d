#include "trainer/host_sync_counter.h"

#include <c10/util/Exception.h>

#include <string_view>

#ifdef TUPE_HAVE_NCCL
#include <c10/cuda/CUDAFunctions.h>
#endif

namespace tupe::trainer {

#ifdef TUPE_HAVE_NCCL
namespace {
/// The warning c10::cuda::warn_or_error_on_sync raises in "warn" mode.
constexpr std::string_view kSyncWarning = "called a synchronizing CUDA operation";
}  // namespace

class HostSyncCounter::Handler final : public c10::WarningHandler {
 public:
  explicit Handler(HostSyncCounter& owner)
      : owner_(owner),
        previous_(c10::WarningUtils::get_warning_handler()),
        previous_mode_(c10::cuda::warning_state().get_sync_debug_mode()) {}
  void process(const c10::Warning& warning) override {
    if (std::string_view(warning.msg()).find(kSyncWarning) != std::string_view::npos) {
      if (owner_.counting_.load(std::memory_order_relaxed)) owner_.count_.fetch_add(1);
      return;
    }
    previous_->process(warning);
  }
  c10::WarningHandler* previous() const { return previous_; }
  c10::cuda::SyncDebugMode previous_mode() const { return previous_mode_; }

 private:
  HostSyncCounter& owner_;
  c10::WarningHandler* previous_;
  c10::cuda::SyncDebugMode previous_mode_;
};

HostSyncCounter::HostSyncCounter(const c10::Device& device) {
  if (!device.is_cuda()) return;
  handler_ = std::make_unique<Handler>(*this);
  c10::WarningUtils::set_warning_handler(handler_.get());
  c10::cuda::warning_state().set_sync_debug_mode(c10::cuda::SyncDebugMode::L_WARN);
}

HostSyncCounter::~HostSyncCounter() {
  if (!handler_) return;
  c10::cuda::warning_state().set_sync_debug_mode(handler_->previous_mode());
  c10::WarningUtils::set_warning_handler(handler_->previous());
}
#else
class HostSyncCounter::Handler {};
HostSyncCounter::HostSyncCounter(const c10::Device&) {}
HostSyncCounter::~HostSyncCounter() = default;
#endif

}  // namespace tupe::trainer
