#include "dist/make_communicator.h"

#include "common/error.h"
#include "dist/mpi_communicator.h"
#include "dist/nccl_communicator.h"

namespace tupe::dist {

#ifndef TUPE_HAVE_NCCL
std::unique_ptr<Communicator> make_nccl_communicator(const MpiEnv&, const DistOptions&, Watchdog*, int) {
  TUPE_FAIL("nccl backend: not compiled in this build (CUDA or NCCL was not found at configure time; "
            "see the 'tupe: CUDA' line of the CMake output)");
}
#endif

bool nccl_compiled() {
#ifdef TUPE_HAVE_NCCL
  return true;
#else
  return false;
#endif
}

std::unique_ptr<Communicator> make_communicator(const MpiEnv& env, const DistOptions& options, Watchdog* watchdog,
                                                const at::Device& tensor_device) {
  BackendKind kind = options.backend;
  if (kind == BackendKind::kAuto) kind = tensor_device.is_cuda() ? BackendKind::kNccl : BackendKind::kMpi;
  if (kind == BackendKind::kMpi) {
    TUPE_CHECK(tensor_device.is_cpu(), "dist.backend: the mpi backend reduces CPU tensors; the tensors are on "
                                           << tensor_device << " (use backend nccl or auto)");
    return std::make_unique<MpiCommunicator>(env, options, watchdog);
  }
  TUPE_CHECK(tensor_device.is_cuda(), "dist.backend: the nccl backend reduces CUDA tensors; the tensors are on "
                                          << tensor_device << " (use backend mpi or auto)");
  TUPE_CHECK(tensor_device.has_index(), "dist.backend: the nccl backend needs a device index (got " << tensor_device
                                                                                                  << ")");
  return make_nccl_communicator(env, options, watchdog, tensor_device.index());
}

}  // namespace tupe::dist
