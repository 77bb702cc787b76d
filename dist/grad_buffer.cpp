#include "dist/grad_buffer.h"

#include <ATen/ATen.h>

#include <map>
#include <set>

#include "common/error.h"
#include "dist/bucket.h"

namespace tupe::dist {

GradBuffer::GradBuffer(const std::vector<NamedParameter>& params, int64_t bucket_size_bytes) {
  TUPE_CHECK(!params.empty(), "GradBuffer: no parameters given");
  const at::Tensor& first = params.front().tensor;
  std::set<std::string> names;
  std::map<const void*, std::string> tensors;  // TensorImpl -> first name (tied weights)
  for (const auto& p : params) {
    TUPE_CHECK(p.tensor.defined(), "GradBuffer: parameter '" << p.name << "' is undefined");
    TUPE_CHECK(names.insert(p.name).second, "GradBuffer: parameter name '" << p.name << "' appears twice");
    const auto [it, fresh] = tensors.emplace(p.tensor.unsafeGetTensorImpl(), p.name);
    TUPE_CHECK(fresh, "GradBuffer: parameters '" << it->second << "' and '" << p.name
                                                 << "' are the same tensor (tied weights); pass it once");
    TUPE_CHECK(p.tensor.requires_grad() && p.tensor.is_leaf(),
               "GradBuffer: parameter '" << p.name << "' is not a leaf tensor that requires grad");
    TUPE_CHECK(p.tensor.scalar_type() == first.scalar_type() && p.tensor.device() == first.device(),
               "GradBuffer: parameter '" << p.name << "' is " << p.tensor.scalar_type() << " on " << p.tensor.device()
                                         << " but '" << params.front().name << "' is " << first.scalar_type()
                                         << " on " << first.device() << "; one buffer holds one dtype and device");
  }
  const int64_t element_bytes = static_cast<int64_t>(first.element_size());
  const int64_t align_numel = std::max<int64_t>(1, kBucketAlignBytes / element_bytes);

  // Reverse order: the last parameter (first gradient of backward) comes first.
  std::vector<size_t> layout;
  std::vector<int64_t> sizes_bytes;
  for (size_t k = params.size(); k-- > 0;) {
    layout.push_back(k);
    sizes_bytes.push_back(params[k].tensor.numel() * element_bytes);
  }
  slots_.resize(params.size());
  shapes_.resize(params.size());
  int64_t offset = 0;
  for (const auto& members : compute_bucket_assignment(sizes_bytes, bucket_size_bytes)) {
    offset = (offset + align_numel - 1) / align_numel * align_numel;
    BucketRange range;
    range.offset_numel = offset;
    for (size_t j : members) {
      const size_t p = layout[j];
      const int64_t numel = params[p].tensor.numel();
      slots_[p] = ParamSlot{offset, numel, buckets_.size()};
      shapes_[p] = params[p].tensor.sizes().vec();
      range.params.push_back(p);
      offset += numel;
    }
    range.numel = offset - range.offset_numel;
    buckets_.push_back(std::move(range));
  }
  data_ = at::zeros({offset}, first.options().requires_grad(false));
}

at::Tensor GradBuffer::bucket_view(size_t b) const {
  return data_.narrow(0, buckets_.at(b).offset_numel, buckets_.at(b).numel);
}

at::Tensor GradBuffer::grad_view(size_t p) const {
  return data_.narrow(0, slots_.at(p).offset_numel, slots_.at(p).numel).view(shapes_.at(p));
}

void GradBuffer::attach(const std::vector<NamedParameter>& params) const {
  TUPE_CHECK(params.size() == slots_.size(),
             "GradBuffer::attach: " << params.size() << " parameters given, the buffer holds " << slots_.size());
  for (size_t p = 0; p < params.size(); ++p) {
    if (attached(params[p], p)) continue;
    at::Tensor view = grad_view(p);
    const at::Tensor& old = params[p].tensor.grad();
    if (old.defined()) view.copy_(old);
    params[p].tensor.mutable_grad() = view;
  }
}

bool GradBuffer::attached(const NamedParameter& param, size_t p) const {
  const at::Tensor& g = param.tensor.grad();
  if (!g.defined() || g.numel() != slots_.at(p).numel) return false;
  if (g.numel() == 0) return true;
  const auto* expected = static_cast<const char*>(data_.data_ptr()) +
                         slots_[p].offset_numel * static_cast<int64_t>(data_.element_size());
  return g.data_ptr() == expected;
}

void GradBuffer::zero() const { data_.zero_(); }

}  // namespace tupe::dist
