// The pre-training step: trainer/train_step.h with the MLM loss. Per step, this rank's
// B / W rows (on the host) are split into k micro-batches of b rows (batch_plan.h), each
// sliced on the host and copied to the device non-blocking; the loss of micro-batch m is
//   l_m = sum over its masked tokens of CE(logits, original id)
// (forward under autocast, the cross-entropy in fp32), with its count, the micro-batch's
// masked tokens; the step divides by their sum over ranks, the masked tokens of the GLOBAL
// batch (what the loader reports as MlmBatch::global_masked_count). Each micro-batch's
// forward runs under model::DropoutSampleKeys(sample_dropout_key(train.seed, t), its rows'
// global sample indices): a sample's dropout masks at step t are the same on every world
// size and micro-batch split (on the CPU; model/dropout.h). What the job runs per optimizer
// step, and what bench/step_profile measures.
#pragma once
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include "data_pipeline/batch.h"
#include "model/tupe_bert.h"
#include "trainer/pretrain/batch_plan.h"
#include "trainer/pretrain/pretrain.h"
#include "trainer/train_step.h"

namespace tupe::pretrain {

/// The training step's options of a pre-training config: [optimizer], [precision] with its
/// precision resolved to the device (`precision`, trainer::resolve_precision: the value the
/// loss scaler reads), [dist] and train.seed (the dropout seeds).
trainer::TrainStepOptions step_options(const PretrainConfig& cfg, trainer::Precision precision);

/// Sum of the cross-entropy over the masked tokens of `b` (on `device`): a 0-dim fp32 tensor,
/// the forward under autocast `amp` (trainer::autocast_dtype).
at::Tensor masked_lm_loss_sum(model::TupeBertImpl& net, const data_pipeline::MlmBatch& b, at::ScalarType amp,
                              const c10::Device& device);

/// Sums of an MLM evaluation from the logits of M masked tokens: a (2) float64 tensor on the
/// logits' device, (sum over m of CE(logits[m], labels[m]), number of m whose argmax over the
/// vocabulary equals labels[m]); ties go to the lowest id, as at::argmax (the first maximum).
/// `logits` (M, V) of any floating dtype (half/bfloat16 are widened to float32, float32 and
/// float64 kept); `labels` (M) int64. Masked-token accuracy is the second sum over M (the
/// figure MLPerf's BERT target is stated in).
at::Tensor mlm_eval_sums(const at::Tensor& logits, const at::Tensor& labels);

/// mlm_eval_sums of the masked tokens of `b` (on `device`), the forward under autocast `amp`.
at::Tensor masked_lm_eval_sums(model::TupeBertImpl& net, const data_pipeline::MlmBatch& b, at::ScalarType amp,
                               const c10::Device& device);

/// One pre-training step of `step` on this rank's host batch, in plan.accumulation
/// micro-batches of plan.micro_batch rows. `times`/`hook` as TrainStep::run. Throws
/// tupe::Error from the step, or for a batch without sample_indices.
trainer::StepResult run_mlm_step(trainer::TrainStep& step, model::TupeBertImpl& net,
                                 const data_pipeline::MlmBatch& batch, const BatchPlan& plan, at::ScalarType amp,
                                 trainer::StepTimes* times = nullptr, const trainer::StepPhaseHook& hook = {});

}  // namespace tupe::pretrain
