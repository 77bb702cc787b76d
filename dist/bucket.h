// Gradient buckets (Megatron's bucket / c10d's Bucket): which parameters share one
// all-reduce, and the run-time state of one bucket through a step.
//
// Contract: a bucket is a contiguous slice of the flat gradient buffer (dist/grad_buffer.h)
// holding whole parameters. Gradients ACCUMULATE (+=) into the buffer during backward; the
// all-reduce OVERWRITES the slice with the sum over ranks, in place.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

#include "dist/communicator.h"
#include "dist/options.h"
#include "dist/trace.h"

namespace tupe::dist {

/// Splits parameters, given in layout order with their sizes in bytes, into buckets of
/// consecutive parameters whose total is at most `cap_bytes`; a parameter larger than the
/// cap gets a bucket of its own. Returns the parameter indices of each bucket, in order
/// (every index exactly once). Pure. Throws tupe::Error when cap_bytes <= 0 or a size < 0.
/// Example: sizes {60, 40, 1, 200, 5} with cap 100 -> {{0, 1}, {2}, {3}, {4}}.
std::vector<std::vector<size_t>> compute_bucket_assignment(const std::vector<int64_t>& sizes_bytes,
                                                           int64_t cap_bytes);

/// One bucket during a step. Lifecycle: reset() -> mark_ready() per parameter -> start()
/// when all are ready -> finish() after backward -> reset().
class Bucket {
 public:
  /// `flat`: the bucket's slice of the gradient buffer (1-D, contiguous); `params`: the
  /// global indices of the parameters it holds; `sum64`: for ReduceDtype::kFp64, the
  /// bucket's slice of the float64 sum buffer ([numel] like `flat`), else undefined.
  Bucket(size_t index, at::Tensor flat, std::vector<size_t> params, at::Tensor sum64 = at::Tensor());

  size_t index() const { return index_; }
  const std::vector<size_t>& params() const { return params_; }
  const at::Tensor& flat() const { return flat_; }
  int64_t pending() const { return pending_; }
  bool started() const { return work_ != nullptr; }

  /// Forgets the last step: all parameters pending again, no collective in flight.
  void reset();
  /// One of its parameters has its gradient; returns true when that was the last one.
  bool mark_ready();
  /// Launches the async all-reduce (sum) of the slice: in place for fp32, or on a bf16
  /// copy (cast, reduce, cast back in finish()) for ReduceDtype::kBf16, or of the float64
  /// sum slice in place for ReduceDtype::kFp64 (rounded into `flat` in finish()).
  void start(Communicator& comm, ReduceDtype dtype, const std::string& name);
  /// Non-blocking: true when the collective has completed (drives MPI progress); the first
  /// true ends the bucket's trace range ("all-reduce bucket <index>", dist/trace.h).
  bool test();
  /// Waits for the collective (NCCL: stream-ordered) and copies a bf16 or float64 result back.
  /// Does nothing if the bucket was not started or already finished.
  void finish();

 private:
  size_t index_;
  at::Tensor flat_;             ///< slice of the gradient buffer, [numel]
  std::vector<size_t> params_;  ///< global parameter indices in this bucket
  int64_t pending_ = 0;         ///< parameters without gradient this step; reset by reset()
  WorkPtr work_;                ///< collective in flight; null before start(); reset by reset()
  at::Tensor reduce_copy_;      ///< bf16 copy being reduced (kBf16 only); reset by reset()
  at::Tensor sum64_;            ///< float64 sum slice (kFp64 only), [numel]
  bool from_sum64_ = false;     ///< start() reduced sum64_; reset by reset()
  bool finished_ = false;       ///< finish() ran since start(); reset by reset()
  AsyncTraceRange trace_;       ///< "all-reduce bucket <index>": start() to when the host saw it done
};

}  // namespace tupe::dist
