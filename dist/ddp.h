// Data-parallel gradient synchronisation with communication overlapped with backward
// (Megatron's DistributedDataParallel + c10d's reducer hooks).
//
// A post-hook on each parameter's grad accumulator (autograd's AccumulateGrad node) fires
// right after that parameter's gradient was added into the flat buffer (dist/grad_buffer.h)
// and counts it ready; when every parameter of a bucket is ready, the bucket's async
// all-reduce is launched -- while backward continues with earlier layers. Buckets are
// launched strictly in bucket order (a ready bucket waits for its predecessors), so every
// rank issues the collectives in the same order whatever order gradients arrive in.
//
// One optimizer step, in this order (c10d reducer's prepare_for_backward shape; each call
// checks the phase, and a call out of order is one error naming what was expected):
//   begin_step();                                  waits for buckets in flight, zeros every gradient
//   for micro-batch m = 0 .. k-1:
//     forward of m;
//     prepare_for_backward(m == k - 1, count);     the last: this rank's loss-term count starts its
//                                                  all-reduce, ahead of the gradient buckets
//     backward;                                    hooks: accumulate; the last launches the buckets
//   (k = 0, a rank without micro-batches: prepare_for_backward(true, 0); sync_without_backward();)
//   finish_grad_sync();                            waits; grad = SUM over ranks, global_count()
//   optimizer step (reads the buffer = the reduced gradients, global_count())
// Gradients ACCUMULATE in the buffer over micro-steps; only the last micro-step's backward
// launches all-reduces. With reduce_dtype fp64 each parameter's gradient is moved, as soon as
// its hook fires, from the buffer into a float64 sum buffer (added, then the buffer slice
// zeroed), and the buckets all-reduce that sum, rounded once into the buffer at the end: the
// step's gradient is then the same whatever the split into ranks and micro-steps. So under
// fp64, between a backward and finish_grad_sync, .grad (the buffer) reads ZERO for every
// parameter whose gradient has arrived: read gradients after finish_grad_sync only. After
// finish_grad_sync, grad = SUM over ranks of the accumulated gradients, unscaled, and
// global_count() = SUM over ranks of the counts (the caller divides: trainer/optimizer_step.h).
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <exception>
#include <memory>
#include <initializer_list>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "dist/bucket.h"
#include "dist/communicator.h"
#include "dist/grad_buffer.h"
#include "dist/options.h"

namespace tupe::dist {

class DistributedDataParallel {
 public:
  /// Builds the buffer (bucket cap options.bucket_size_bytes), makes each param.grad a view
  /// into it (an existing gradient is kept) and attaches one hook per parameter. `comm`
  /// must outlive this object; all ranks must pass the same parameters (see
  /// check_same_parameters in dist/consistency.h). Throws tupe::Error as GradBuffer does.
  DistributedDataParallel(Communicator& comm, std::vector<NamedParameter> params, const DistOptions& options);
  /// Removes the hooks (RAII; a destroyed object is never called by autograd) and waits for
  /// buckets in flight, except while an exception unwinds or after the communicator was
  /// aborted (then the handles are dropped without waiting).
  ~DistributedDataParallel();
  DistributedDataParallel(const DistributedDataParallel&) = delete;
  DistributedDataParallel& operator=(const DistributedDataParallel&) = delete;

  /// Start of a step (any phase): waits for buckets still in flight, zeros the flat buffer
  /// (every gradient), re-attaches any .grad that was replaced, and forgets readiness.
  void begin_step();

  /// Before each micro-step's backward (after begin_step): `is_last` false for the
  /// accumulation micro-steps (gradients only accumulate, no all-reduce), true for the last,
  /// whose backward launches the all-reduces. On the last, `local_count` (when given) is this
  /// rank's count of the step's loss terms (masked tokens, examples; >= 0; 0 on a rank without
  /// examples): its all-reduce (SUM, float64: exact below 2^53) starts at once, ahead of the
  /// gradient buckets, on every rank in the same place of the collective order; a device
  /// fill, no host sync. Throws tupe::Error out of order (before begin_step, after the last
  /// micro-step was prepared or the step synced), for a negative count, or for a count on an
  /// accumulation micro-step.
  void prepare_for_backward(bool is_last, std::optional<int64_t> local_count = std::nullopt);

  /// For a rank without micro-batches in this step (after prepare_for_backward(true, 0)):
  /// marks every parameter ready with the zero gradient the buffer holds and launches every
  /// bucket, so that the rank joins every all-reduce of the step without a forward or
  /// backward. Throws tupe::Error out of order or when some gradient already arrived.
  void sync_without_backward();

  /// After the last micro-step's backward: waits for every bucket and the count (NCCL:
  /// stream-ordered), casts bf16 results back. Throws tupe::Error out of order (no last
  /// micro-step prepared, or a second call in one step), or "K of N parameters never received
  /// a gradient: names..." when some parameter's hook did not fire (after waiting for what was
  /// launched, so ranks stay in step).
  void finish_grad_sync();

  /// After finish_grad_sync of a step whose last micro-step gave a count: [1] float64 on the
  /// buffer's device, the sum over ranks of the local counts (read it on the device, or on
  /// the host at the cost of a host sync on a GPU). Undefined before the first such step.
  const at::Tensor& global_count() const { return count_; }
  /// The flat gradient buffer (the parameters' .grad views). Its values are the step's summed
  /// gradient after finish_grad_sync; mid-step under reduce_dtype fp64 they are zero for every
  /// gradient that arrived (moved into the float64 sum; see the top of this file).
  const GradBuffer& buffer() const { return buffer_; }
  size_t num_buckets() const { return buckets_.size(); }
  const std::vector<NamedParameter>& params() const { return params_; }
  /// Bucket all-reduces launched since construction (for tests and logs).
  int64_t buckets_launched() const;

 private:
  /// The hooks on the parameters' AccumulateGrad nodes (defined in ddp.cpp, so the
  /// autograd headers and the pointer type they use stay out of this header).
  struct Hooks;
  class ReadyHook;

  /// Called by the hook of parameter `p` after its gradient was accumulated.
  void on_grad_ready(size_t p);
  /// Launches ready buckets in bucket order (mutex_ held).
  void launch_ready_buckets();
  /// Waits for every launched bucket and the count (mutex_ held).
  void finish_launched_buckets();
  /// Forgets readiness and collectives of the step (mutex_ held).
  void reset_step();
  /// Throws tupe::Error "ddp: <call>: <what was expected>" unless the phase is one of `allowed`.
  void require_phase(const char* call, std::initializer_list<int> allowed, const char* expected) const;

  Communicator& comm_;
  const DistOptions options_;
  const int uncaught_at_start_ = std::uncaught_exceptions();  ///< for unwinding_since()
  std::vector<NamedParameter> params_;
  GradBuffer buffer_;
  std::vector<Bucket> buckets_;  ///< in launch order
  std::unique_ptr<Hooks> hooks_;

  /// Where the step stands (the order at the top of this file).
  enum Phase : int {
    kIdle,          ///< constructed, or a step ended by an error: begin_step next
    kBegun,         ///< begin_step done: prepare_for_backward next
    kAccumulating,  ///< an accumulation micro-step prepared: its backward, then prepare_for_backward
    kLast,          ///< the last micro-step prepared: its backward (or sync_without_backward), then finish
    kSynced,        ///< finish_grad_sync done: the gradients are read; begin_step next
  };

  mutable std::mutex mutex_;  ///< guards the state below (hooks may run on autograd threads)
  Phase phase_ = kIdle;
  std::vector<char> ready_;        ///< per parameter: gradient arrived this step; reset by reset_step
  size_t ready_count_ = 0;         ///< parameters ready this step; reset by reset_step
  size_t next_to_launch_ = 0;      ///< first bucket not yet launched; reset by reset_step
  size_t next_to_test_ = 0;        ///< first launched bucket not seen complete; reset by reset_step
  int64_t buckets_launched_ = 0;   ///< total launches since construction
  at::Tensor count_;               ///< [1] float64: this rank's count, then the sum over ranks
  at::Tensor sum64_;               ///< reduce_dtype fp64 only: [buffer numel] float64 gradient sum
  WorkPtr count_work_;             ///< the count's all-reduce in flight; reset by reset_step
};

}  // namespace tupe::dist
