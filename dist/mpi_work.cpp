#include "dist/mpi_work.h"

#include <thread>

#include "dist/check.h"
#include "dist/mpi_env.h"

namespace tupe::dist {

namespace {
/// What an incomplete handle leaves to its lifetime: the requests and the buffers MPI may
/// still read or write.
struct ParkedRequests {
  std::vector<MPI_Request> requests;
  std::vector<at::Tensor> buffers;
};
}  // namespace

MpiWork::MpiWork(const MpiEnv& env, std::shared_ptr<BackendLifetime> lifetime, std::vector<at::Tensor> keep_alive)
    : env_(env), lifetime_(std::move(lifetime)), keep_alive_(std::move(keep_alive)) {}

MpiWork::~MpiWork() {
  if (lifetime_->ended() || unwinding_since(uncaught_at_start_)) {
    // No waiting for peers now: one non-blocking look, then park what is still in flight.
    bool complete = done_;
    try {
      if (!complete && !lifetime_->ended()) complete = test_locked();
    } catch (...) {
      complete = false;
    }
    if (!complete && !requests_.empty())
      lifetime_->park(std::make_shared<ParkedRequests>(ParkedRequests{std::move(requests_), std::move(keep_alive_)}));
  } else {
    try {
      do_wait();
    } catch (...) {
      // A destructor cannot report; the error surfaced (or will) through wait() elsewhere.
    }
  }
  mark_complete();
}

bool MpiWork::test_locked() {
  if (done_) return true;
  if (requests_.empty()) {
    done_ = true;
    return true;
  }
  int flag = 0;
  {
    auto mpi = env_.lock();
    TUPE_MPI_CHECK(MPI_Testall(static_cast<int>(requests_.size()), requests_.data(), &flag, MPI_STATUSES_IGNORE));
  }
  if (flag) {
    done_ = true;
    keep_alive_.clear();
  }
  return done_;
}

void MpiWork::do_wait() {
  for (;;) {
    {
      std::lock_guard<std::mutex> lk(mutex_);
      if (test_locked()) break;
    }
    TUPE_CHECK(!lifetime_->ended(), "mpi backend: rank " << env_.rank()
                                                         << ": a collective's wait: the communicator was aborted "
                                                            "(after an earlier error or timeout)");
    std::this_thread::yield();
  }
  mark_complete();
}

bool MpiWork::query() {
  std::unique_lock<std::mutex> lk(mutex_, std::try_to_lock);
  if (!lk.owns_lock()) return false;
  if (lifetime_->ended() && !done_) return true;  // nothing more will come: stop asking
  return test_locked();
}

std::function<bool()> MpiWork::make_probe() {
  // The destructor completes (or parks) the requests, so an expired handle means "complete".
  return [weak = weak_from_this()] {
    auto self = weak.lock();
    if (!self) return true;
    try {
      return self->query();
    } catch (...) {
      return false;  // the owner's wait() reports the MPI error
    }
  };
}

}  // namespace tupe::dist
