#include "trainer/train_step.h"

#include <ATen/ATen.h>

#include <chrono>
#include <vector>

#include "common/error.h"
#include "common/mix64.h"
#include "dist/trace.h"

namespace tupe::trainer {

uint64_t step_seed(int64_t seed, int64_t step, int rank) {
  return mix64(static_cast<uint64_t>(seed) * kGoldenGamma ^ static_cast<uint64_t>(step) * 0xBF58476D1CE4E5B9ULL ^
               static_cast<uint64_t>(rank + 1) * 0x94D049BB133111EBULL);
}

uint64_t sample_dropout_key(int64_t seed, int64_t step) {
  return hash_words({static_cast<uint64_t>(seed), 0x64726f70ULL, static_cast<uint64_t>(step)});
}

TrainStep::TrainStep(const checkpoint::NamedTensors& params, dist::Communicator& comm, const c10::Device& device,
                     const TrainStepOptions& options)
    : device_(device),
      rank_(comm.rank()),
      seed_(options.seed),
      params_(params),
      scaler_(options.precision),
      schedule_(options.optimizer),
      exposed_sync_(device) {
  TUPE_CHECK(!params_.empty(), "training step: no trainable parameters");
  optimizer_ = make_optimizer(params_, options.optimizer);
  scaler_.to(device_);
  std::vector<dist::NamedParameter> dist_params;
  dist_params.reserve(params_.size());
  for (const auto& [name, t] : params_) dist_params.push_back({name, t});
  ddp_ = std::make_unique<dist::DistributedDataParallel>(comm, std::move(dist_params), options.dist);
  optimizer_step_ =
      std::make_unique<OptimizerStep>(*optimizer_, scaler_, schedule_, options.optimizer.clip_grad_norm);
}

StepResult TrainStep::run(int64_t micro_batches, const MicroBatchLossFn& loss, StepTimes* times,
                          const StepPhaseHook& hook) {
  const int64_t t = step_ + 1;
  TUPE_CHECK(micro_batches >= 0, "step " << t << ": " << micro_batches << " micro-batches on rank " << rank_);
  using Clock = std::chrono::steady_clock;
  auto mark = Clock::now();
  auto phase_done = [&](const char* phase) {
    if (hook) hook(phase);
    if (times != nullptr) {
      const auto now = Clock::now();
      times->seconds[phase] += std::chrono::duration<double>(now - mark).count();
      mark = now;
    }
  };
  if (times != nullptr)
    for (const char* p : {"forward", "backward", "reduce", "optimizer"}) times->seconds[p] = 0;

  at::manual_seed(step_seed(seed_, t, rank_));  // dropout of step t, whatever ran before
  ddp_->begin_step();  // the order of a step: dist/ddp.h
  at::Tensor loss_sum;
  int64_t local_count = 0;
  for (int64_t m = 0; m < micro_batches; ++m) {
    const bool last = m == micro_batches - 1;
    const MicroBatchLoss l = [&] {
      const dist::TraceRange range(dist::trace_names::kForward);
      return loss(m);
    }();
    TUPE_CHECK(l.sum.defined() && l.sum.numel() == 1,
               "step " << t << ": the loss of micro-batch " << m << " is not one value");
    TUPE_CHECK(l.count >= 0, "step " << t << ": micro-batch " << m << " has a negative count " << l.count);
    local_count += l.count;
    phase_done("forward");
    // Only the last backward all-reduces; the count travels ahead of its gradient buckets.
    ddp_->prepare_for_backward(last, last ? std::optional<int64_t>(local_count) : std::nullopt);
    {
      const dist::TraceRange range(dist::trace_names::kBackward);
      scaler_.scale_loss(l.sum).backward();
    }
    loss_sum = m == 0 ? l.sum.detach() : loss_sum + l.sum.detach();
    phase_done("backward");
  }
  if (micro_batches == 0) {  // nothing on this rank: count 0 and a zero gradient, no forward
    ddp_->prepare_for_backward(true, 0);
    ddp_->sync_without_backward();
    loss_sum = at::zeros({}, ddp_->buffer().data().options().dtype(
                                 ddp_->buffer().data().scalar_type() == at::kDouble ? at::kDouble : at::kFloat));
  }
  exposed_sync_.backward_ended();
  {
    const dist::TraceRange range(dist::trace_names::kGradSyncWait);
    ddp_->finish_grad_sync();
  }
  exposed_sync_.sync_finished();
  phase_done("reduce");
  StepResult result = [&] {
    const dist::TraceRange range(dist::trace_names::kOptimizer);
    return optimizer_step_->apply(ddp_->buffer().data(), scheduler_step_ + 1, ddp_->global_count());
  }();
  result.loss_sum = std::move(loss_sum);
  step_ = t;
  ++scheduler_step_;
  phase_done("optimizer");
  return result;
}

TrainStepState TrainStep::state() const { return {step_, scheduler_step_, scaler_.state()}; }

void TrainStep::load_state(const TrainStepState& state) {
  TUPE_CHECK(state.step >= 0 && state.scheduler_step >= 0,
             "training step: negative counters (step " << state.step << ", scheduler step " << state.scheduler_step
                                                       << ")");
  scaler_.load_state(state.scaler);
  step_ = state.step;
  scheduler_step_ = state.scheduler_step;
}

}  // namespace tupe::trainer
