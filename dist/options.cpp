#include "dist/options.h"

#include <cmath>

namespace tupe::dist {

std::string to_string(BackendKind b) {
  switch (b) {
    case BackendKind::kAuto: return "auto";
    case BackendKind::kNccl: return "nccl";
    case BackendKind::kMpi: return "mpi";
  }
  return "?";
}

BackendKind parse_backend(const std::string& t) {
  for (auto b : {BackendKind::kAuto, BackendKind::kNccl, BackendKind::kMpi})
    if (t == to_string(b)) return b;
  TUPE_FAIL("key 'backend': expected auto, nccl or mpi, got '" << t << "'");
}

std::string to_string(ReduceDtype d) { return d == ReduceDtype::kFp32 ? "fp32" : "bf16"; }

ReduceDtype parse_reduce_dtype(const std::string& t) {
  TUPE_CHECK(t == "fp32" || t == "bf16", "key 'reduce_dtype': expected fp32 or bf16, got '" << t << "'");
  return t == "fp32" ? ReduceDtype::kFp32 : ReduceDtype::kBf16;
}

std::string to_string(GradReduce g) { return g == GradReduce::kSum ? "sum" : "average"; }

GradReduce parse_grad_reduce(const std::string& t) {
  TUPE_CHECK(t == "sum" || t == "average", "key 'grad_reduce': expected sum or average, got '" << t << "'");
  return t == "sum" ? GradReduce::kSum : GradReduce::kAverage;
}

void DistOptions::validate() const {
  TUPE_CHECK(bucket_size_bytes > 0, "dist.bucket_size_bytes: must be positive, got " << bucket_size_bytes);
  TUPE_CHECK(std::isfinite(grad_scale), "dist.grad_scale: must be finite, got " << grad_scale);
  TUPE_CHECK(std::isfinite(timeout_s) && timeout_s >= 0, "dist.timeout_s: must be >= 0 (0 = off), got " << timeout_s);
}

const FieldTable<DistOptions>& DistOptions::fields() {
  static const FieldTable<DistOptions> table = [] {
    FieldTable<DistOptions> t;
    t.custom(
         "backend", "auto | nccl | mpi: communicator (auto: NCCL for CUDA tensors, MPI for CPU tensors)",
         [](const DistOptions& o) { return to_string(o.backend); },
         [](DistOptions& o, const std::string& v) { o.backend = parse_backend(v); })
        .integer("bucket_size_bytes", &DistOptions::bucket_size_bytes,
                 "gradient bucket cap (bytes); a bucket is all-reduced as soon as all its gradients are ready")
        .custom(
            "reduce_dtype", "fp32 | bf16: dtype gradient buckets are all-reduced in (bf16: cast, reduce, cast back)",
            [](const DistOptions& o) { return to_string(o.reduce_dtype); },
            [](DistOptions& o, const std::string& v) { o.reduce_dtype = parse_reduce_dtype(v); })
        .custom(
            "grad_reduce", "sum | average: gradients summed over ranks, or summed then divided by the world size (pretrain and "
            "finetune take sum: their losses are divided by global counts)",
            [](const DistOptions& o) { return to_string(o.grad_reduce); },
            [](DistOptions& o, const std::string& v) { o.grad_reduce = parse_grad_reduce(v); })
        .real("grad_scale", &DistOptions::grad_scale, "factor applied to the reduced gradients (1 = none)")
        .real("timeout_s", &DistOptions::timeout_s,
              "collective timeout (seconds): the watchdog aborts the job when one takes longer; 0 = off");
    return t;
  }();
  return table;
}

}  // namespace tupe::dist
