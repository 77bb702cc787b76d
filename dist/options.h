// Options of the data-parallel layer ([dist] section of a config). Plain struct with a
// documented default per field; validate() is pure and throws tupe::Error naming the key.
// The same FieldTable drives --help, INI parsing and printing (common/config_fields.h).
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
std::string to_string(BackendKind b);
/// Throws tupe::Error for a name other than auto, nccl, mpi.
BackendKind parse_backend(const std::string& text);

/// The dtype gradients travel in during the all-reduce.
enum class ReduceDtype {
  kFp32,  ///< reduce in the gradient dtype (fp32 for fp32 parameters)
  kBf16,  ///< cast the bucket to bf16, reduce, cast back (half the bytes, ~3 significant digits)
};
std::string to_string(ReduceDtype d);
ReduceDtype parse_reduce_dtype(const std::string& text);

/// How the summed gradients are scaled after the all-reduce.
enum class GradReduce {
  kSum,      ///< SUM over ranks (the trainer divides the loss by the GLOBAL masked-token count)
  kAverage,  ///< SUM / world size
};
std::string to_string(GradReduce g);
GradReduce parse_grad_reduce(const std::string& text);

struct DistOptions {
  BackendKind backend = BackendKind::kAuto;  ///< auto | nccl | mpi
  int64_t bucket_size_bytes = 25 * 1024 * 1024;  ///< gradient bucket cap (bytes; c10d's 25 MiB)
  ReduceDtype reduce_dtype = ReduceDtype::kFp32;  ///< fp32 | bf16 wire dtype of gradient buckets
  GradReduce grad_reduce = GradReduce::kSum;      ///< sum | average across ranks
  double grad_scale = 1.0;   ///< extra factor applied to the reduced gradients (1.0 = none)
  double timeout_s = 600.0;  ///< a collective not finished after this many seconds aborts the job; 0 = no watchdog

  /// Throws tupe::Error "dist.<key>: <cause>" on a bad value.
  void validate() const;

  /// The one field table (help text with units) for this struct.
  static const FieldTable<DistOptions>& fields();
};

}  // namespace tupe::dist
