#include "trainer/pretrain/step.h"

#include <ATen/ATen.h>
#include <torch/cuda.h>

#include <chrono>
#include <cmath>

#include "common/error.h"
#include "trainer/autocast.h"

namespace tupe::pretrain {

at::ScalarType amp_dtype(trainer::Precision p) {
  switch (p) {
    case trainer::Precision::kBf16: return at::kBFloat16;
    case trainer::Precision::kFp16: return at::kHalf;
    case trainer::Precision::kFp32: return at::kFloat;
  }
  return at::kFloat;
}

data_pipeline::Batch to_device(const data_pipeline::Batch& b, const c10::Device& device) {
  if (device.is_cpu()) return b;
  data_pipeline::Batch out = b;
  const bool nb = true;  // pinned batches copy asynchronously
  out.input_ids = b.input_ids.to(device, nb);
  out.attention_mask = b.attention_mask.to(device, nb);
  if (b.segment_ids.defined()) out.segment_ids = b.segment_ids.to(device, nb);
  out.masked_positions = b.masked_positions.to(device, nb);
  out.masked_labels = b.masked_labels.to(device, nb);
  return out;
}

at::Tensor masked_lm_loss_sum(model::TupeBertImpl& net, const data_pipeline::Batch& b, at::ScalarType amp,
                              const c10::Device& device) {
  at::Tensor logits;
  {
    trainer::AutocastScope autocast(device.type(), amp);
    logits = net.mlm_logits(b.input_ids, b.attention_mask, b.segment_ids, b.masked_positions);  // (M, V)
  }
  return at::cross_entropy_loss(logits.to(at::kFloat), b.masked_labels, /*weight=*/{}, at::Reduction::Sum);
}

StepRunner::StepRunner(model::TupeBertImpl& net, dist::DistContext& context, const PretrainConfig& cfg,
                       int64_t accumulation, int64_t micro_batch)
    : net_(net),
      device_(context.device()),
      amp_(amp_dtype(cfg.precision.precision)),
      accumulation_(accumulation),
      micro_batch_(micro_batch),
      clip_grad_norm_(cfg.optimizer.clip_grad_norm),
      scaler_(cfg.precision),
      schedule_(cfg.optimizer) {
  TUPE_CHECK(accumulation >= 1 && micro_batch >= 1,
             "step: accumulation " << accumulation << " and micro-batch " << micro_batch << " must be positive");
  std::vector<dist::NamedParameter> params;
  for (auto& item : net.named_parameters()) {
    params.push_back({item.key(), item.value()});
    named_.emplace_back(item.key(), item.value());
  }
  optimizer_ = make_optimizer(named_, cfg.optimizer);
  scaler_.to(device_);
  ddp_ = std::make_unique<dist::DistributedDataParallel>(context.comm(), params, cfg.dist);
  step_ = std::make_unique<trainer::OptimizerStep>(*optimizer_, scaler_, schedule_, clip_grad_norm_);
}

StepResult StepRunner::run(const data_pipeline::Batch& host_batch, int64_t step, int64_t& scheduler_step,
                           StepTimes* times, const StepPhaseHook& hook) {
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

  ddp_->zero_grad_buffer();
  const double global_masked = static_cast<double>(host_batch.global_masked_count);
  TUPE_CHECK(global_masked > 0, "step " << step << ": the global batch has no masked tokens");
  StepResult result;
  for (int64_t m = 0; m < accumulation_; ++m) {
    ddp_->set_is_last_microbatch(m == accumulation_ - 1);
    // Sliced on the host (no device-side index arithmetic), then one copy per tensor.
    const data_pipeline::Batch mb =
        to_device(accumulation_ == 1 ? host_batch
                                     : data_pipeline::slice_rows(host_batch, m * micro_batch_, (m + 1) * micro_batch_),
                  device_);
    at::Tensor ls = masked_lm_loss_sum(net_, mb, amp_, device_);
    phase_done("forward");
    scaler_.scale_loss(ls / global_masked).backward();
    result.loss_sum = m == 0 ? ls.detach() : result.loss_sum + ls.detach();
    phase_done("backward");
  }
  ddp_->finish_grad_sync();
  phase_done("reduce");
  trainer::StepOutcome outcome = step_->apply(ddp_->buffer().data(), scheduler_step + 1);
  scheduler_step += 1;
  result.grad_norm = std::move(outcome.grad_norm);
  result.found_inf = std::move(outcome.found_inf);
  result.lr = outcome.lr;
  phase_done("optimizer");
  return result;
}

}  // namespace tupe::pretrain
