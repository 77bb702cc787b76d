#include "dist/startup.h"

#include <cstdlib>
#include <exception>
#include <sstream>

#include "common/config_fields.h"
#include "common/error.h"
#include "common/log.h"
#include "dist/check.h"
#include "dist/mpi_env.h"
#include "dist/stall_injection.h"

namespace tupe::dist {

StartupWatch::StartupWatch() : thread_([this] { run(); }) {}

StartupWatch::~StartupWatch() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void StartupWatch::arm(double seconds, std::function<void()> fire) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++generation_;
    armed_ = seconds > 0;
    deadline_ = std::chrono::steady_clock::now() +
                std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(seconds));
    fire_ = std::move(fire);
  }
  wake_.notify_all();
}

void StartupWatch::disarm() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++generation_;
    armed_ = false;
    fire_ = nullptr;
  }
  wake_.notify_all();
}

void StartupWatch::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stop_) {
    if (!armed_) {
      wake_.wait(lock);
      continue;
    }
    const uint64_t generation = generation_;
    if (wake_.wait_until(lock, deadline_) != std::cv_status::timeout) continue;  // re-armed, disarmed or stopped
    if (stop_ || !armed_ || generation != generation_) continue;
    std::function<void()> fire = std::move(fire_);
    armed_ = false;
    lock.unlock();
    if (fire) fire();  // ends the process (MpiEnv::abort); returns only in tests
    lock.lock();
  }
}

double startup_timeout_from_env() {
  const char* text = std::getenv(kStartupTimeoutEnv);
  if (text == nullptr || *text == '\0') return kDefaultStartupTimeout_s;
  double s = 0;
  try {
    s = parse_double(kStartupTimeoutEnv, text);
  } catch (const Error& e) {
    TUPE_FAIL(kStartupTimeoutEnv << ": " << e.what());
  }
  TUPE_CHECK(s >= 0, kStartupTimeoutEnv << ": expected seconds >= 0 (0: unbounded), got '" << text << "'");
  return s;
}

std::string describe_ranks(const std::vector<int>& ranks, const std::vector<std::string>& hosts) {
  auto host_of = [&](int r) {
    return r >= 0 && static_cast<size_t>(r) < hosts.size() ? hosts[static_cast<size_t>(r)] : "";
  };
  std::ostringstream os;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1 && host_of(ranks[j + 1]) == host_of(ranks[i])) ++j;
    if (i > 0) os << ", ";
    if (j == i)
      os << "rank " << ranks[i];
    else
      os << "ranks " << ranks[i] << "-" << ranks[j];
    if (!host_of(ranks[i]).empty()) os << " (" << host_of(ranks[i]) << ")";
    i = j + 1;
  }
  return os.str();
}

namespace {

std::string seconds_text(double s) {
  std::ostringstream os;
  os << s;
  return os.str();
}

/// The test hook: rank R sleeps on entering phase NAME.
void maybe_stall_at(const MpiEnv& env, const std::string& phase) {
  const StallInjection stall = stall_injection_from_env();
  if (!stall.active() || stall.phase != phase || stall.rank != env.rank()) return;
  log::warn(std::string(kStallInjectionEnv) + " stall injection: sleeping " + seconds_text(stall.seconds) +
            " s on entering start-up phase '" + phase + "'");
  sleep_for_stall(stall, "rank " + std::to_string(env.rank()) + " in " + phase);
}

}  // namespace

StartupPhase::StartupPhase(const MpiEnv& env, std::string name) : env_(env), name_(std::move(name)) {
  if (env.world_size() == 1 || !env.in_startup() || env.startup_timeout_s() <= 0) return;
  maybe_stall_at(env, name_);
  limit_s_ = env.startup_timeout_s();
  const int world = env.world_size();
  const int tag = static_cast<int>(env.next_startup_sequence() % 32767);  // MPI_TAG_UB >= 32767
  {
    auto lock = env.lock();
    if (env.rank() == 0) {
      arrivals_.assign(static_cast<size_t>(world), -1);
      requests_.assign(static_cast<size_t>(world), MPI_REQUEST_NULL);
      for (int r = 1; r < world; ++r)
        TUPE_MPI_CHECK(MPI_Irecv(&arrivals_[static_cast<size_t>(r)], 1, MPI_INT64_T, r, tag, env.arrival_comm(),
                                 &requests_[static_cast<size_t>(r)]));
    } else {
      arrivals_.assign(1, tag);
      requests_.assign(1, MPI_REQUEST_NULL);
      TUPE_MPI_CHECK(MPI_Isend(arrivals_.data(), 1, MPI_INT64_T, 0, tag, env.arrival_comm(), requests_.data()));
    }
  }
  active_ = true;
  if (env.rank() == 0) {
    env.startup_watch().arm(limit_s_, [this] { env_.abort(missing_line()); });
  } else {
    const double waited = limit_s_ + kStartupGraceNonRoot_s;
    env.startup_watch().arm(waited, [this, waited] {
      env_.abort("start-up: rank " + std::to_string(env_.rank()) + ": phase '" + name_ + "' did not finish within " +
                 seconds_text(waited) + " s, and rank 0, which names the missing ranks, did not end the job: " +
                 describe_ranks({0}, env_.hosts()) + " is missing or late; ending the job (dist.startup_timeout_s)");
    });
  }
}

std::string StartupPhase::missing_line() const {
  std::ostringstream os;
  os << "start-up: phase '" << name_ << "' did not finish within " << seconds_text(limit_s_) << " s: ";
  if (!env_.thread_multiple()) {
    os << "the missing ranks are not known (MPI grants only MPI_THREAD_SERIALIZED)";
  } else {
    std::vector<int> missing;
    for (size_t r = 1; r < requests_.size(); ++r) {
      int done = 0;
      MPI_Request probe = requests_[r];  // a copy: the main thread owns the request until the phase closes
      if (probe != MPI_REQUEST_NULL && MPI_Request_get_status(probe, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && !done)
        missing.push_back(static_cast<int>(r));
    }
    if (missing.empty())
      os << "every rank arrived, so the wait is in the phase itself";
    else
      os << describe_ranks(missing, env_.hosts()) << " did not arrive";
  }
  os << "; ending the job (dist.startup_timeout_s)";
  return os.str();
}

StartupPhase::~StartupPhase() {
  if (!active_) return;
  {
    auto lock = env_.lock();  // (an empty lock under MPI_THREAD_MULTIPLE)
    if (std::uncaught_exceptions() > uncaught_at_start_) {
      // The phase failed on this rank: do not wait for arrivals (the job is ending).
      for (auto& r : requests_) {
        if (r == MPI_REQUEST_NULL) continue;
        if (env_.rank() == 0) MPI_Cancel(&r);
        MPI_Request_free(&r);
      }
    } else {
      // The phase's collectives returned, so every rank arrived: its message is here or on the
      // way (still under the deadline).
      MPI_Waitall(static_cast<int>(requests_.size()), requests_.data(), MPI_STATUSES_IGNORE);
    }
  }
  env_.startup_watch().disarm();
}

}  // namespace tupe::dist
