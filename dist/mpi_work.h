// Work handle over MPI non-blocking requests (MPI_Iallreduce, MPI_Ibcast, MPI_Iallgather,
// MPI_Ibarrier). Completion is polled with MPI_Testall (which also drives Open MPI's
// progress of non-blocking collectives); each MPI call holds MpiEnv::lock(). The handle
// keeps the tensors it reads and writes alive. Its destructor completes the requests,
// except after the communicator was aborted or while an exception unwinds: then it parks
// the requests and their tensors in the communicator's BackendLifetime instead of waiting
// for peers that may never come ("Failure paths" in dist/communicator.h).
#pragma once
#include <ATen/core/Tensor.h>
#include <mpi.h>

#include <memory>
#include <mutex>
#include <vector>

#include "dist/backend_lifetime.h"
#include "dist/communicator.h"

namespace tupe::dist {

class MpiWork final : public Work, public std::enable_shared_from_this<MpiWork> {
 public:
  /// `lifetime`: the launching communicator's; `keep_alive`: tensors the requests use.
  /// Create with std::make_shared, then add the requests with add_request() before handing
  /// the handle out.
  MpiWork(const MpiEnv& env, std::shared_ptr<BackendLifetime> lifetime, std::vector<at::Tensor> keep_alive);
  /// Completes outstanding requests (blocking; errors are swallowed in a destructor), or
  /// parks them (see above).
  ~MpiWork() override;

  /// Appends one launched request (only before the handle is shared).
  void add_request(MPI_Request request) { requests_.push_back(request); }

 protected:
  /// Blocks until complete; throws tupe::Error once the communicator was aborted.
  void do_wait() override;
  bool query() override;
  std::function<bool()> make_probe() override;

 private:
  bool test_locked();  ///< MPI_Testall with mutex_ held

  const MpiEnv& env_;
  const std::shared_ptr<BackendLifetime> lifetime_;
  const int uncaught_at_start_ = std::uncaught_exceptions();  ///< for unwinding_since()
  std::vector<MPI_Request> requests_;
  std::vector<at::Tensor> keep_alive_;
  std::mutex mutex_;  ///< guards requests_ and done_ (one thread at a time per request)
  bool done_ = false;
};

}  // namespace tupe::dist
