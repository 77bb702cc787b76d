#include "dist/options.h"

namespace tupe::dist {

std::string to_string(BackendKind b) { return choice_word(b, kBackendWords); }

BackendKind parse_backend(const std::string& text) { return parse_choice("key 'backend'", text, kBackendWords); }

void DistOptions::validate() const { fields().check(*this); }

const FieldTable<DistOptions>& DistOptions::fields() {
  using D = DistOptions;
  static const FieldTable<D> table = [] {
    FieldTable<D> t("dist");
    t.choice("backend", &D::backend, kBackendWords, BackendKind::kAuto,
             "communicator: NCCL for CUDA tensors and MPI for CPU tensors (auto), or one of them")
        .integer("bucket_size_bytes", &D::bucket_size_bytes, 25 * 1024 * 1024, "bytes",
                 "gradient bucket cap (c10d's 25 MiB); a bucket is all-reduced as soon as all its gradients are ready")
        .positive()
        .choice("reduce_dtype", &D::reduce_dtype, kReduceDtypeWords, ReduceDtype::kFp32,
                "dtype gradient buckets are all-reduced in (bf16: cast, reduce, cast back; fp64: every micro-batch's "
                "gradient summed in float64 and rounded once, so that any world size with the same micro-batches "
                "takes the same steps, bitwise)")
        .real("timeout_s", &D::timeout_s, 600.0, "seconds",
              "a collective not finished after this long aborts the job, naming it (the watchdog); 0 = off")
        .at_least(0)
        .real("startup_timeout_s", &D::startup_timeout_s, 0.0, "seconds",
              "from a rank's start to the job's work, a rank that has not joined a start-up wait (config, "
              "placement, data and resume checks) after this long ends the job, naming the phase and the missing "
              "ranks; 0 = timeout_s (raise it for a slow shared file system)")
        .at_least(0)
        .removed("grad_reduce",
                 "is no longer read: gradients are always summed over ranks (both jobs divide their losses by the "
                 "global batch's counts); remove the key")
        .removed("grad_scale",
                 "is no longer read: the training step divides the summed gradients by the global batch's count "
                 "(any other factor would break data-parallel exactness); remove the key");
    return t;
  }();
  return table;
}

}  // namespace tupe::dist
