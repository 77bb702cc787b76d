// Options of the data-parallel layer ([dist] section of a config). Every field -- its
// meaning, unit, default and range -- is described once, in the field table in options.cpp
// (common/config_fields.h; `tupe pretrain --help` prints it, docs/config.md lists it).
// validate() is pure and throws tupe::Error naming the key.
#pragma once
#include <cstdint>
#include <string>

#include "common/config_fields.h"

namespace tupe::dist {

/// Which communicator carries the tensors.
enum class BackendKind {
  kAuto,  ///< NCCL for CUDA tensors, MPI for CPU tensors
  kNccl,  ///< NCCL (GPU only; needs a build with TUPE_HAVE_NCCL)
  kMpi,   ///< MPI non-blocking collectives on contiguous CPU tensors
};
inline constexpr Choice<BackendKind> kBackendWords[] = {
    {"auto", BackendKind::kAuto}, {"nccl", BackendKind::kNccl}, {"mpi", BackendKind::kMpi}};
/// "auto" | "nccl" | "mpi".
std::string to_string(BackendKind b);
/// The backend of a word; throws tupe::Error "key 'backend': expected auto, nccl or mpi, got '<text>'".
BackendKind parse_backend(const std::string& text);

/// The dtype gradients are summed in: over ranks (the all-reduce), and for kFp64 also over
/// a rank's micro-batches.
enum class ReduceDtype {
  kFp32,  ///< reduce in the gradient dtype (fp32 for fp32 parameters)
  kBf16,  ///< cast the bucket to bf16, reduce, cast back (half the bytes, ~3 significant digits)
  /// Each micro-batch's gradient is added into a float64 buffer right after its backward
  /// (the gradient buffer is zeroed again), and the float64 buffer is all-reduced, then
  /// rounded once to the gradient dtype. A sum of a few fp32 values is exact in float64 as
  /// long as their exponents span less than ~29 bits, so the result does not depend on
  /// how the micro-batches were split over ranks and micro-steps: with a fixed micro-batch
  /// size, runs on different world sizes take the same steps, bitwise (docs/clusters.md).
  /// Costs 8 bytes per parameter and twice the all-reduce bytes of fp32.
  kFp64,
};
inline constexpr Choice<ReduceDtype> kReduceDtypeWords[] = {
    {"fp32", ReduceDtype::kFp32}, {"bf16", ReduceDtype::kBf16}, {"fp64", ReduceDtype::kFp64}};

/// [dist] section. Gradients are always SUMMED over ranks, unscaled: the training step
/// divides the sum by the global batch's count (trainer/train_step.h), so the result is the
/// global mean's gradient. The former keys grad_reduce and grad_scale are refused with one
/// line each.
struct DistOptions {
  DistOptions() { fields().reset(*this); }
  BackendKind backend;
  int64_t bucket_size_bytes;
  ReduceDtype reduce_dtype;
  double timeout_s;
  double startup_timeout_s;

  /// The limit of every start-up wait (dist/startup.h): startup_timeout_s, or timeout_s when
  /// it is 0 (seconds; 0 = unbounded).
  double startup_limit_s() const { return startup_timeout_s > 0 ? startup_timeout_s : timeout_s; }

  /// The field table's ranges. Throws tupe::Error "dist.<key>: <cause>".
  void validate() const;
  static const FieldTable<DistOptions>& fields();
};

}  // namespace tupe::dist
