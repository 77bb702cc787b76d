#include "dist/mpi_work.h"

#include <thread>

#include "dist/check.h"
#include "dist/mpi_env.h"

namespace tupe::dist {

MpiWork::MpiWork(const MpiEnv& env, std::vector<at::Tensor> keep_alive)
    : env_(env), keep_alive_(std::move(keep_alive)) {}

MpiWork::~MpiWork() {
  try {
    do_wait();
  } catch (...) {
    // A destructor cannot report; the error surfaced (or will) through wait() elsewhere.
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
    std::this_thread::yield();
  }
  mark_complete();
}

bool MpiWork::query() {
  std::unique_lock<std::mutex> lk(mutex_, std::try_to_lock);
  if (!lk.owns_lock()) return false;
  return test_locked();
}

std::function<bool()> MpiWork::make_probe() {
  // The destructor completes the requests, so an expired handle means "complete".
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
