// Work handle over MPI non-blocking requests (MPI_Iallreduce, MPI_Ibcast, MPI_Iallgather,
// MPI_Ibarrier). Completion is polled with MPI_Testall (which also drives Open MPI's
// progress of non-blocking collectives); each MPI call holds MpiEnv::lock(). The handle
// keeps the tensors it reads and writes alive, and its destructor completes the requests.
#pragma once
#include <ATen/core/Tensor.h>
#include <mpi.h>

#include <memory>
#include <mutex>
#include <vector>

#include "dist/communicator.h"

namespace tupe::dist {

class MpiWork final : public Work, public std::enable_shared_from_this<MpiWork> {
 public:
  /// `keep_alive`: tensors the requests use. Create with std::make_shared, then add the
  /// requests with add_request() before handing the handle out.
  MpiWork(const MpiEnv& env, std::vector<at::Tensor> keep_alive);
  /// Completes outstanding requests (blocking; errors are swallowed in a destructor).
  ~MpiWork() override;

  /// Appends one launched request (only before the handle is shared).
  void add_request(MPI_Request request) { requests_.push_back(request); }

 protected:
  void do_wait() override;
  bool query() override;
  std::function<bool()> make_probe() override;

 private:
  bool test_locked();  ///< MPI_Testall with mutex_ held

  const MpiEnv& env_;
  std::vector<MPI_Request> requests_;
  std::vector<at::Tensor> keep_alive_;
  std::mutex mutex_;  ///< guards requests_ and done_ (one thread at a time per request)
  bool done_ = false;
};

}  // namespace tupe::dist
