// NCCL backend of the communicator (CUDA tensors), compiled only with TUPE_HAVE_NCCL.
// Bootstrap over MPI, data over NCCL (llm.c's zero.cuh split): rank 0 creates the
// ncclUniqueId, MPI broadcasts it, every rank initialises its communicator on its CUDA
// device (dist/device.h chose it).
//
// Bounded waits: the communicator is non-blocking (ncclConfig_t.blocking = 0), so
// initialisation and each enqueue return at once and are polled until done; past
// dist.timeout_s the communicator is aborted (ncclCommAbort) and tupe::Error names the
// rank, the step and the operation. A collective that was enqueued but never completes
// on the GPU is the watchdog's (dist/watchdog.h), which calls abort_backend() and ends
// the job. Collectives run on a dedicated high-priority CUDA stream ordered with events,
// never a host sync: the NCCL stream waits on an event recorded on the caller's current
// (compute) stream; Work::wait() makes the caller's current stream wait on the NCCL
// completion event. Tensors are recorded on the NCCL stream with the caching allocator
// (recordStream), so freeing them early is safe.
//
// All-reduce dtypes: float32, float64, float16, bfloat16, int32, int64, uint8 (NCCL
// native; the sum is NCCL's). Broadcast moves bytes (any dtype). Tensors must be
// contiguous and on this rank's device; anything else fails naming the backend.
#pragma once
#include <memory>

#include "dist/communicator.h"

namespace tupe::dist {

/// Creates the NCCL communicator on CUDA device `device_index`. Collective over all ranks
/// (MPI + NCCL init); when any rank lacks its CUDA device every rank throws the same
/// tupe::Error; an initialisation that does not finish within options.timeout_s (> 0)
/// throws after aborting. In a build without TUPE_HAVE_NCCL it throws "nccl backend: ...
/// not compiled".
std::unique_ptr<Communicator> make_nccl_communicator(const MpiEnv& env, const DistOptions& options,
                                                     Watchdog* watchdog, int device_index);

}  // namespace tupe::dist
