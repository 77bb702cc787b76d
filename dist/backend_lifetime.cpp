#include "dist/backend_lifetime.h"

#include <utility>

namespace tupe::dist {

BackendLifetime::~BackendLifetime() {
  if (!parked_.empty()) {
    // Deliberately never freed: an MPI request that never completed may still write into
    // these buffers during MPI_Abort or MPI_Finalize (see the header).
    new std::vector<std::shared_ptr<void>>(std::move(parked_));
  }
}

void BackendLifetime::set_abort_action(std::function<void()> action) {
  std::lock_guard<std::timed_mutex> lock(mutex_);
  abort_action_ = std::move(action);
}

bool BackendLifetime::abort() noexcept {
  std::unique_lock<std::timed_mutex> lock(mutex_, std::defer_lock);
  const bool locked = lock.try_lock_for(std::chrono::seconds(2));
  if (ended_.exchange(true)) return false;
  aborted_.store(true);
  if (locked && abort_action_) {
    try {
      abort_action_();
    } catch (...) {
      // Ending the backend matters more than a failed clean-up.
    }
  }
  return true;
}

bool BackendLifetime::close(const std::function<void()>& finish) noexcept {
  std::lock_guard<std::timed_mutex> lock(mutex_);
  if (ended_.exchange(true)) return false;
  try {
    if (finish) finish();
  } catch (...) {
    // As in abort(): the backend is ended either way.
  }
  return true;
}

void BackendLifetime::park(std::shared_ptr<void> leftovers) {
  std::lock_guard<std::timed_mutex> lock(mutex_);
  parked_.push_back(std::move(leftovers));
}

size_t BackendLifetime::parked() const {
  std::lock_guard<std::timed_mutex> lock(mutex_);
  return parked_.size();
}

}  // namespace tupe::dist
