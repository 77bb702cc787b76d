// The flat gradient buffer (Megatron's param_and_grad_buffer): one contiguous tensor that
// holds every parameter's gradient, laid out in REVERSE parameter order (the order backward
// produces them) and cut into buckets (compute_bucket_assignment). Each bucket starts at a
// multiple of kBucketAlignBytes; the padding stays zero.
//
// Contract: param.grad is made a VIEW into this buffer, so autograd's AccumulateGrad adds
// (+=) each micro-step's gradient into the buffer in place. Anything that replaces .grad
// (Module::zero_grad() with set_to_none, an optimizer setting None) detaches it; use
// DistributedDataParallel::begin_step(), which zeros the buffer and re-attaches.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

namespace tupe::dist {

/// A parameter with its name (Module::named_parameters() order), e.g. "encoder.0.attn.wq".
struct NamedParameter {
  std::string name;
  at::Tensor tensor;  ///< a leaf that requires grad
};

/// Bucket starts are aligned to this many bytes (NCCL/vector friendly).
constexpr int64_t kBucketAlignBytes = 256;

/// Where one parameter's gradient lives.
struct ParamSlot {
  int64_t offset_numel = 0;  ///< first element in the flat buffer
  int64_t numel = 0;         ///< elements of the parameter
  size_t bucket = 0;         ///< bucket holding it
};

/// One bucket's slice of the flat buffer.
struct BucketRange {
  int64_t offset_numel = 0;    ///< first element (a multiple of kBucketAlignBytes / element size)
  int64_t numel = 0;           ///< elements, padding excluded
  std::vector<size_t> params;  ///< global parameter indices, in layout (reverse) order
};

class GradBuffer {
 public:
  /// Lays out `params` (all the same dtype and device, each requiring grad) in reverse
  /// order into buckets of at most `bucket_size_bytes`, and allocates the zeroed buffer.
  /// Throws tupe::Error naming the parameter on a mixed dtype/device, a parameter that does
  /// not require grad or is not a leaf, a duplicate name, the same tensor under two names
  /// (tied weights: pass it once), or an empty list.
  GradBuffer(const std::vector<NamedParameter>& params, int64_t bucket_size_bytes);

  /// The flat buffer, [total numel incl. padding], dtype and device of the parameters.
  const at::Tensor& data() const { return data_; }
  const std::vector<ParamSlot>& slots() const { return slots_; }
  const std::vector<BucketRange>& buckets() const { return buckets_; }
  /// Bucket `b`'s slice, [numel] (a view).
  at::Tensor bucket_view(size_t b) const;
  /// Parameter `p`'s gradient view, shaped like the parameter.
  at::Tensor grad_view(size_t p) const;

  /// Makes each params[p].grad the view grad_view(p); a gradient the parameter already had
  /// is copied into the buffer first.
  void attach(const std::vector<NamedParameter>& params) const;
  /// True when params[p].grad is (still) the buffer's view.
  bool attached(const NamedParameter& param, size_t p) const;
  /// Zeros the whole buffer (all gradients, padding stays zero).
  void zero() const;

 private:
  at::Tensor data_;
  std::vector<ParamSlot> slots_;      ///< indexed by global parameter index
  std::vector<BucketRange> buckets_;  ///< in layout order = launch order
  std::vector<std::vector<int64_t>> shapes_;
};

}  // namespace tupe::dist
