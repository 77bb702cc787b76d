#include "dist/watchdog.h"

#include <algorithm>
#include <utility>
#include <sstream>
#include <vector>

#include "common/config_fields.h"
#include "common/log.h"
#include "common/error.h"
#include "dist/device.h"

namespace tupe::dist {

namespace {
std::chrono::milliseconds default_poll(double timeout_s) {
  const auto ms = static_cast<int64_t>(timeout_s * 1000.0 / 20.0);
  return std::chrono::milliseconds(std::clamp<int64_t>(ms, 10, 1000));
}
}  // namespace

Watchdog::Watchdog(int rank, double timeout_s, AbortFn abort, std::chrono::milliseconds poll, c10::Device device)
    : rank_(rank),
      timeout_s_(timeout_s),
      abort_(std::move(abort)),
      poll_(poll.count() > 0 ? poll : default_poll(timeout_s)),
      device_(device),
      thread_() {
  TUPE_CHECK(timeout_s > 0, "Watchdog: timeout must be positive (seconds), got " << timeout_s);
  TUPE_CHECK(static_cast<bool>(abort_), "Watchdog: no abort function given");
  thread_ = std::thread([this] { run(); });
}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> lk(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

uint64_t Watchdog::start(std::string name, int64_t step, std::function<bool()> is_completed) {
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(timeout_s_));
  std::lock_guard<std::mutex> lk(mutex_);
  const uint64_t id = next_id_++;
  entries_.emplace(id, Entry{std::move(name), step, deadline, std::move(is_completed)});
  return id;
}

void Watchdog::finish(uint64_t id) {
  std::lock_guard<std::mutex> lk(mutex_);
  entries_.erase(id);
}

size_t Watchdog::in_flight() const {
  std::lock_guard<std::mutex> lk(mutex_);
  return entries_.size();
}

int64_t Watchdog::fired() const {
  std::lock_guard<std::mutex> lk(mutex_);
  return fired_;
}

void Watchdog::run() {
  try {
    set_current_device(device_);
  } catch (const std::exception& e) {
    log::warn("watchdog: cannot select " + device_.str() + ": " + e.what());
  }
  std::unique_lock<std::mutex> lk(mutex_);
  while (!stop_) {
    wake_.wait_for(lk, poll_, [this] { return stop_; });
    if (stop_) break;
    if (entries_.empty()) continue;
    // Probe every entry without holding the lock (a probe may take a work handle's own
    // lock, and Work::wait takes that lock before calling finish()); completed ones are
    // dropped, so handles that were never test()ed or waited on do not pile up.
    std::vector<std::pair<uint64_t, Entry>> snapshot(entries_.begin(), entries_.end());
    lk.unlock();
    const auto now = std::chrono::steady_clock::now();
    std::vector<uint64_t> done;
    const Entry* hung = nullptr;
    uint64_t hung_id = 0;
    const Entry* failed = nullptr;  // the first entry whose probe threw
    uint64_t failed_id = 0;
    std::string failure;
    for (const auto& [id, e] : snapshot) {
      bool completed = false;
      std::string error;
      try {
        completed = e.is_completed && e.is_completed();
      } catch (const std::exception& ex) {
        error = ex.what();
      } catch (...) {
        error = "unknown exception from the completion probe";
      }
      if (!error.empty()) {
        if (failed == nullptr) failed = &e, failed_id = id, failure = error;
      } else if (completed) {
        done.push_back(id);
      } else if (e.deadline <= now && hung == nullptr) {
        hung = &e;
        hung_id = id;
      }
    }
    lk.lock();
    for (uint64_t id : done) entries_.erase(id);
    // Still registered? (finish() may have raced with the probe.)
    if (failed != nullptr && entries_.count(failed_id) == 0) failed = nullptr;
    if (failed == nullptr && (hung == nullptr || entries_.count(hung_id) == 0)) continue;
    std::ostringstream msg;
    if (failed != nullptr) {
      // A failure on the device is reported as what it is, not as a hang at the deadline.
      msg << "watchdog: rank " << rank_ << ": collective '" << failed->name << "' at step " << failed->step
          << " failed: " << failure << "; " << entries_.size() << " collective(s) in flight; aborting the job";
      entries_.erase(failed_id);
    } else {
      msg << "watchdog: rank " << rank_ << ": collective '" << hung->name << "' at step " << hung->step
          << " did not finish within " << format_double(timeout_s_) << " s (dist.timeout_s); " << entries_.size()
          << " collective(s) in flight; aborting the job";
    }
    ++fired_;
    // Overdue entries are dropped once reported, so a recording abort (tests) fires once.
    for (const auto& [id, e] : snapshot)
      if (e.deadline <= now) entries_.erase(id);
    const std::string text = msg.str();
    lk.unlock();
    abort_(text);
    lk.lock();
  }
}

}  // namespace tupe::dist
