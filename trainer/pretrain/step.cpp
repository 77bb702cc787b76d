#include "trainer/pretrain/step.h"

#include <ATen/ATen.h>

#include "common/error.h"
#include "model/dropout.h"
#include "trainer/autocast.h"

namespace tupe::pretrain {

trainer::TrainStepOptions step_options(const PretrainConfig& cfg, trainer::Precision precision) {
  trainer::TrainStepOptions o;
  o.optimizer = cfg.optimizer;
  o.precision = cfg.precision;
  o.precision.precision = precision;
  o.dist = cfg.dist;
  o.seed = cfg.train.seed;
  return o;
}

at::Tensor masked_lm_loss_sum(model::TupeBertImpl& net, const data_pipeline::MlmBatch& b, at::ScalarType amp,
                              const c10::Device& device) {
  at::Tensor logits;
  {
    trainer::AutocastScope autocast(device.type(), amp);
    logits = net.mlm_logits(b.input_ids, b.attention_mask, b.segment_ids, b.masked_positions);  // (M, V)
  }
  // Half/bfloat16 logits (autocast) are summed in float32; float32 and float64 ones in their own dtype.
  const at::Tensor l = logits.scalar_type() == at::kDouble ? logits : logits.to(at::kFloat);
  return at::cross_entropy_loss(l, b.masked_labels, /*weight=*/{}, at::Reduction::Sum);
}

at::Tensor mlm_eval_sums(const at::Tensor& logits, const at::Tensor& labels) {
  TUPE_CHECK(logits.dim() == 2 && labels.dim() == 1 && logits.size(0) == labels.size(0),
             "mlm_eval_sums: logits " << logits.sizes() << " and labels " << labels.sizes() << " do not pair up");
  const at::Tensor l = logits.scalar_type() == at::kDouble ? logits : logits.to(at::kFloat);
  const at::Tensor ce = at::cross_entropy_loss(l, labels, /*weight=*/{}, at::Reduction::Sum).to(at::kDouble);
  const at::Tensor correct = l.argmax(/*dim=*/1).eq(labels).sum().to(at::kDouble);
  return at::stack({ce, correct});
}

at::Tensor masked_lm_eval_sums(model::TupeBertImpl& net, const data_pipeline::MlmBatch& b, at::ScalarType amp,
                               const c10::Device& device) {
  at::Tensor logits;
  {
    trainer::AutocastScope autocast(device.type(), amp);
    logits = net.mlm_logits(b.input_ids, b.attention_mask, b.segment_ids, b.masked_positions);  // (M, V)
  }
  return mlm_eval_sums(logits, b.masked_labels);
}

trainer::StepResult run_mlm_step(trainer::TrainStep& step, model::TupeBertImpl& net,
                                 const data_pipeline::MlmBatch& batch, const BatchPlan& plan, at::ScalarType amp,
                                 trainer::StepTimes* times, const trainer::StepPhaseHook& hook) {
  TUPE_CHECK(plan.accumulation >= 1 && plan.micro_batch * plan.accumulation == batch.rows(),
             "step: " << plan.accumulation << " micro-batches of " << plan.micro_batch << " rows do not make this rank's "
                      << batch.rows() << " rows");
  const c10::Device device = step.device();
  const uint64_t dropout_key = trainer::sample_dropout_key(step.seed(), step.step() + 1);
  const auto micro_loss = [&](int64_t m) {
    // Sliced on the host (no device-side index arithmetic), then one copy per tensor.
    const data_pipeline::MlmBatch host =
        plan.accumulation == 1 ? batch
                               : data_pipeline::slice_rows(batch, m * plan.micro_batch, (m + 1) * plan.micro_batch);
    const data_pipeline::MlmBatch mb = data_pipeline::to_device(host, device);
    // Dropout keyed by (step, sample), not by rank: any world size draws the same masks.
    TUPE_CHECK(host.sample_indices.defined() && host.sample_indices.numel() == host.rows(),
               "step: micro-batch " << m << " does not carry the global sample index of each of its " << host.rows()
                                    << " rows");
    const at::Tensor ids = host.sample_indices.contiguous();
    const model::DropoutSampleKeys keys(
        dropout_key, std::vector<int64_t>(ids.data_ptr<int64_t>(), ids.data_ptr<int64_t>() + ids.numel()));
    return trainer::MicroBatchLoss{masked_lm_loss_sum(net, mb, amp, device), mb.masked_positions.numel()};
  };
  return step.run(plan.accumulation, micro_loss, times, hook);
}

}  // namespace tupe::pretrain
