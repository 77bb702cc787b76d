// The backend factory: the one place that knows both communicators (dist/mpi_communicator.h,
// dist/nccl_communicator.h), above the interface (dist/communicator.h), which knows neither.
#pragma once
#include <ATen/core/Tensor.h>

#include <memory>

#include "dist/communicator.h"

namespace tupe::dist {

class MpiEnv;
class Watchdog;

/// True when this build compiled the NCCL backend (TUPE_HAVE_NCCL).
bool nccl_compiled();

/// Creates the backend options.backend names; kAuto picks NCCL when `tensor_device` is
/// CUDA (the NCCL communicator then runs on that device), MPI when it is CPU. Throws
/// tupe::Error when the choice cannot work (NCCL for CPU tensors, NCCL in a build without
/// it, MPI for CUDA tensors).
std::unique_ptr<Communicator> make_communicator(const MpiEnv& env, const DistOptions& options, Watchdog* watchdog,
                                                const at::Device& tensor_device);

}  // namespace tupe::dist
