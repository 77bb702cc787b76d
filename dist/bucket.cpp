#include "dist/bucket.h"

#include "common/error.h"

namespace tupe::dist {

std::vector<std::vector<size_t>> compute_bucket_assignment(const std::vector<int64_t>& sizes_bytes,
                                                           int64_t cap_bytes) {
  TUPE_CHECK(cap_bytes > 0, "compute_bucket_assignment: bucket cap must be positive, got " << cap_bytes << " bytes");
  std::vector<std::vector<size_t>> buckets;
  std::vector<size_t> current;
  int64_t current_bytes = 0;
  for (size_t i = 0; i < sizes_bytes.size(); ++i) {
    const int64_t size = sizes_bytes[i];
    TUPE_CHECK(size >= 0, "compute_bucket_assignment: parameter " << i << " has negative size " << size << " bytes");
    if (!current.empty() && current_bytes + size > cap_bytes) {
      buckets.push_back(std::move(current));
      current.clear();
      current_bytes = 0;
    }
    current.push_back(i);
    current_bytes += size;
  }
  if (!current.empty()) buckets.push_back(std::move(current));
  return buckets;
}

Bucket::Bucket(size_t index, at::Tensor flat, std::vector<size_t> params, at::Tensor sum64)
    : index_(index),
      flat_(std::move(flat)),
      params_(std::move(params)),
      sum64_(std::move(sum64)),
      trace_(trace_names::all_reduce_bucket(index)) {
  reset();
}

void Bucket::reset() {
  pending_ = static_cast<int64_t>(params_.size());
  work_.reset();
  reduce_copy_ = at::Tensor();
  from_sum64_ = false;
  finished_ = false;
}

bool Bucket::mark_ready() {
  TUPE_CHECK(pending_ > 0, "gradient bucket " << index_ << ": more gradients became ready than it holds ("
                                              << params_.size() << ")");
  return --pending_ == 0;
}

void Bucket::start(Communicator& comm, ReduceDtype dtype, const std::string& name) {
  TUPE_CHECK(!started(), "gradient bucket " << index_ << ": all-reduce started twice in one step");
  trace_.begin();
  if (dtype == ReduceDtype::kFp64 && sum64_.defined()) {
    from_sum64_ = true;
    work_ = comm.all_reduce({sum64_}, name);
  } else if (dtype == ReduceDtype::kBf16 && flat_.scalar_type() != at::kBFloat16) {
    reduce_copy_ = flat_.to(at::kBFloat16);
    work_ = comm.all_reduce({reduce_copy_}, name);
  } else {
    work_ = comm.all_reduce({flat_}, name);
  }
}

bool Bucket::test() {
  if (work_ == nullptr || finished_) return true;
  if (!work_->test()) return false;
  trace_.mark_end();
  return true;
}

void Bucket::finish() {
  if (work_ == nullptr || finished_) return;
  work_->wait();
  trace_.end();
  if (reduce_copy_.defined()) {
    flat_.copy_(reduce_copy_);
    reduce_copy_ = at::Tensor();
  }
  if (from_sum64_) flat_.copy_(sum64_);  // the one rounding to the gradient dtype
  finished_ = true;
}

}  // namespace tupe::dist
