#include "dist/ddp.h"

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <algorithm>
#include <initializer_list>
#include <sstream>
#include <utility>

#include "common/error.h"

namespace tupe::dist {

// Note [Gradient-ready hook]: autograd runs a node's post-hooks right after the node; for
// a leaf's AccumulateGrad node that is right after param.grad += new gradient, i.e. after
// the gradient reached the flat buffer. c10d's reducer attaches its autograd_hook the same
// way (grad_accumulator + add_post_hook) and keeps the accumulators alive, because a leaf
// holds its accumulator only weakly.
class DistributedDataParallel::ReadyHook final : public torch::autograd::FunctionPostHook {
 public:
  ReadyHook(DistributedDataParallel* ddp, size_t param) : ddp_(ddp), param_(param) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                            const torch::autograd::variable_list& /*inputs*/) override {
    ddp_->on_grad_ready(param_);
    return outputs;
  }

 private:
  DistributedDataParallel* ddp_;
  size_t param_;
};

// A leaf holds its AccumulateGrad node weakly; the hook set keeps each one alive. Its
// pointer type is whatever grad_accumulator() returns (std::shared_ptr<Node> in LibTorch
// 2.11, c10::intrusive_ptr<Node> later), so one code path compiles against both.
struct DistributedDataParallel::Hooks {
  using AccumulatorPtr = decltype(torch::autograd::impl::grad_accumulator(std::declval<const at::Tensor&>()));
  struct Hook {
    AccumulatorPtr accumulator;  ///< kept alive so the hook survives
    uintptr_t key = 0;           ///< del_post_hook key
  };
  std::vector<Hook> hooks;

  /// Removes every hook (the destructor and a failed constructor).
  void remove_all() noexcept {
    for (auto& h : hooks) h.accumulator->del_post_hook(h.key);
    hooks.clear();
  }
};

DistributedDataParallel::DistributedDataParallel(Communicator& comm, std::vector<NamedParameter> params,
                                                 const DistOptions& options)
    : comm_(comm), options_(options), params_(std::move(params)), buffer_(params_, options.bucket_size_bytes) {
  options_.validate();
  // fp64 sums: unless the gradients are float64 already (then fp64 is the plain in-place sum).
  if (options_.reduce_dtype == ReduceDtype::kFp64 && buffer_.data().scalar_type() != at::kDouble)
    sum64_ = at::zeros_like(buffer_.data(), buffer_.data().options().dtype(at::kDouble));
  for (size_t b = 0; b < buffer_.buckets().size(); ++b) {
    const BucketRange& range = buffer_.buckets()[b];
    buckets_.emplace_back(b, buffer_.bucket_view(b), range.params,
                          sum64_.defined() ? sum64_.narrow(0, range.offset_numel, range.numel) : at::Tensor());
  }
  ready_.assign(params_.size(), 0);
  buffer_.attach(params_);
  hooks_ = std::make_unique<Hooks>();
  hooks_->hooks.reserve(params_.size());
  try {
    for (size_t p = 0; p < params_.size(); ++p) {
      Hooks::Hook h;
      h.accumulator = torch::autograd::impl::grad_accumulator(params_[p].tensor);
      TUPE_CHECK(h.accumulator, "ddp: parameter '" << params_[p].name << "' has no gradient accumulator");
      h.key = h.accumulator->add_post_hook(std::make_unique<ReadyHook>(this, p));
      hooks_->hooks.push_back(std::move(h));
    }
  } catch (...) {
    hooks_->remove_all();  // no hook may outlive a failed constructor
    throw;
  }
}

DistributedDataParallel::~DistributedDataParallel() {
  hooks_->remove_all();
  std::lock_guard<std::mutex> lk(mutex_);
  // While an exception unwinds, or after the communicator was aborted, buckets in flight
  // are not waited for: peers may never join them ("Failure paths" in dist/communicator.h).
  if (unwinding_since(uncaught_at_start_) || comm_.aborted()) return;
  try {
    finish_launched_buckets();
  } catch (...) {
    // A destructor cannot report; the work handles complete their requests themselves.
  }
}

namespace {
const char* phase_name(int phase) {
  static const char* names[] = {"before begin_step", "after begin_step", "after an accumulation micro-step",
                                "after the last micro-step", "after finish_grad_sync"};
  return names[phase];
}
}  // namespace

void DistributedDataParallel::require_phase(const char* call, std::initializer_list<int> allowed,
                                            const char* expected) const {
  for (int p : allowed)
    if (p == phase_) return;
  TUPE_FAIL("ddp: " << call << " " << phase_name(phase_) << ": " << expected
                    << " (the order of a step: dist/ddp.h)");
}

void DistributedDataParallel::begin_step() {
  std::lock_guard<std::mutex> lk(mutex_);
  finish_launched_buckets();  // never zero a slice that is being reduced
  buffer_.attach(params_);  // re-attach first: a detached .grad must not be copied back in
  buffer_.zero();
  if (sum64_.defined()) sum64_.zero_();
  reset_step();
  phase_ = kBegun;
}

void DistributedDataParallel::prepare_for_backward(bool is_last, std::optional<int64_t> local_count) {
  std::lock_guard<std::mutex> lk(mutex_);
  require_phase("prepare_for_backward", {kBegun, kAccumulating},
                "call begin_step first; one last micro-step per step");
  if (local_count) {
    TUPE_CHECK(*local_count >= 0, "ddp: prepare_for_backward: negative count " << *local_count);
    TUPE_CHECK(is_last, "ddp: prepare_for_backward: a count on an accumulation micro-step (the last micro-step "
                        "carries the step's count)");
    // A new tensor per step: a result that holds the last step's count keeps its value.
    count_ = at::full({1}, static_cast<double>(*local_count), buffer_.data().options().dtype(at::kDouble));
    count_work_ = comm_.all_reduce({count_}, "all_reduce step count");
  }
  phase_ = is_last ? kLast : kAccumulating;
}

void DistributedDataParallel::sync_without_backward() {
  std::lock_guard<std::mutex> lk(mutex_);
  require_phase("sync_without_backward", {kLast}, "call prepare_for_backward(true, 0) first");
  TUPE_CHECK(ready_count_ == 0,
             "ddp: sync_without_backward after " << ready_count_ << " gradients arrived in this step");
  for (size_t p = 0; p < params_.size(); ++p) {
    ready_[p] = 1;
    ++ready_count_;
    buckets_[buffer_.slots()[p].bucket].mark_ready();
  }
  launch_ready_buckets();
}

int64_t DistributedDataParallel::buckets_launched() const {
  std::lock_guard<std::mutex> lk(mutex_);
  return buckets_launched_;
}

void DistributedDataParallel::on_grad_ready(size_t p) {
  std::lock_guard<std::mutex> lk(mutex_);
  TUPE_CHECK(buffer_.attached(params_[p], p),
             "ddp: parameter '" << params_[p].name
                                << "': .grad no longer views the gradient buffer (reset by zero_grad(set_to_none) "
                                   "or replaced?); call DistributedDataParallel::begin_step() instead");
  require_phase("a gradient arrived", {kAccumulating, kLast},
                "call prepare_for_backward before each backward (and begin_step before a step)");
  if (sum64_.defined()) {  // fp64: move this micro-step's gradient into the float64 sum (.grad reads 0 till finish)
    const ParamSlot& slot = buffer_.slots()[p];
    at::Tensor grad = buffer_.data().narrow(0, slot.offset_numel, slot.numel);
    sum64_.narrow(0, slot.offset_numel, slot.numel).add_(grad);
    grad.zero_();
  }
  if (phase_ == kAccumulating) return;  // the gradient only accumulates
  TUPE_CHECK(!ready_[p], "ddp: parameter '" << params_[p].name
                                            << "' received a second gradient in the same synchronised step (two "
                                               "backward passes after prepare_for_backward(true)?)");
  ready_[p] = 1;
  ++ready_count_;
  if (buckets_[buffer_.slots()[p].bucket].mark_ready()) launch_ready_buckets();
  // Drive progress of collectives in flight (MPI progresses non-blocking collectives only
  // inside MPI calls).
  while (next_to_test_ < next_to_launch_ && buckets_[next_to_test_].test()) ++next_to_test_;
}

void DistributedDataParallel::launch_ready_buckets() {
  while (next_to_launch_ < buckets_.size() && buckets_[next_to_launch_].pending() == 0) {
    Bucket& b = buckets_[next_to_launch_];
    std::ostringstream name;
    name << "all_reduce grad bucket " << b.index() << "/" << buckets_.size() << " (" << b.flat().numel()
         << " elements)";
    b.start(comm_, options_.reduce_dtype, name.str());
    ++next_to_launch_;
    ++buckets_launched_;
  }
}

void DistributedDataParallel::finish_launched_buckets() {
  if (count_work_) count_work_->wait();  // launched before the buckets: finished first
  for (size_t b = 0; b < next_to_launch_; ++b) buckets_[b].finish();
}

void DistributedDataParallel::reset_step() {
  for (auto& b : buckets_) b.reset();
  std::fill(ready_.begin(), ready_.end(), 0);
  ready_count_ = 0;
  next_to_launch_ = 0;
  next_to_test_ = 0;
  count_work_.reset();
}

void DistributedDataParallel::finish_grad_sync() {
  std::lock_guard<std::mutex> lk(mutex_);
  require_phase("finish_grad_sync", {kLast}, "it follows the last micro-step's backward, once per step");
  finish_launched_buckets();
  if (ready_count_ < params_.size()) {
    const size_t missing = params_.size() - ready_count_;
    std::ostringstream names;
    size_t listed = 0;
    for (size_t p = 0; p < params_.size(); ++p) {
      if (ready_[p]) continue;
      if (listed == 10) {
        names << ", ...";
        break;
      }
      names << (listed++ ? ", " : "") << params_[p].name;
    }
    reset_step();
    phase_ = kIdle;
    TUPE_FAIL("ddp: finish_grad_sync: " << missing << " of " << params_.size()
                                        << " parameters never received a gradient (unused in forward, or no "
                                           "backward since begin_step): "
                                        << names.str());
  }
  reset_step();
  phase_ = kSynced;
}

}  // namespace tupe::dist
