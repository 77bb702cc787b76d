// MPI backend of the communicator (CPU tensors): MPI_Iallreduce (in place, MPI_SUM) and
// MPI_Ibcast on contiguous CPU tensors, one non-blocking request per tensor (split in
// chunks of 2^30 elements for MPI's int counts).
//
// All-reduce dtypes: float32, float64, int32, int64 natively; bfloat16 through a custom
// commutative MPI op on 16-bit elements that adds pairs in float32 and rounds to nearest
// even back to bf16 (c10::BFloat16). No upcast: bf16 buckets travel as 2 bytes/element,
// and each partial sum is rounded to bf16, like NCCL's bf16 all-reduce. Other dtypes and
// non-CPU or non-contiguous tensors fail loudly naming the backend. Broadcast moves bytes
// and takes any dtype.
#pragma once
#include <mpi.h>

#include "dist/communicator.h"

namespace tupe::dist {

class MpiCommunicator final : public Communicator {
 public:
  /// Creates the bf16 sum op; `env` and `watchdog` (may be null) must outlive it.
  MpiCommunicator(const MpiEnv& env, const DistOptions& options, Watchdog* watchdog);
  ~MpiCommunicator() override;

  const char* backend_name() const override { return "mpi"; }

 protected:
  WorkPtr launch_all_reduce(const std::vector<at::Tensor>& tensors, const std::string& name) override;
  WorkPtr launch_broadcast(const std::vector<at::Tensor>& tensors, int root, const std::string& name) override;

 private:
  MPI_Op bf16_sum_ = MPI_OP_NULL;  ///< sum of bf16 pairs computed in float32
};

}  // namespace tupe::dist
