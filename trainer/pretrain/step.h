// One pre-training step of one rank (what `tupe pretrain` runs per optimizer step, and what
// bench/step_profile measures):
//   for each of the k micro-batches m (rows [m b, (m + 1) b) of this rank's B / W rows,
//   sliced on the host, copied to the device non-blocking):
//     forward under autocast at the masked positions, loss
//       L_m = sum over its masked tokens of CE / (masked tokens of the GLOBAL batch)
//     backward of L_m * S (S = fp16 loss scale); the DDP buckets all-reduce (SUM) during
//     the last micro-step's backward only;
//   finish the gradient sync, then the shared optimizer step (trainer/optimizer_step.h:
//   norm, inf/NaN check, unscale + clip, AdamW/LAMB, loss scaler, all on the device).
// No host sync: the result's tensors stay on the device until the job reads them.
// The model, optimizer, loss scaler, LR schedule and DDP live here; the job (pretrain.cpp)
// resumes them through the accessors and decides when to log and checkpoint.
#pragma once
#include <ATen/core/Tensor.h>

#include <functional>
#include <map>
#include <memory>
#include <string>

#include "data_pipeline/batch.h"
#include "dist/context.h"
#include "dist/ddp.h"
#include "model/tupe_bert.h"
#include "trainer/pretrain/pretrain.h"
#include "trainer/loss_scaler.h"
#include "trainer/lr_schedule.h"
#include "trainer/optimizer.h"
#include "trainer/optimizer_step.h"

namespace tupe::pretrain {

/// Wall time of a step's phases (seconds): "forward", "backward" (summed over micro-steps),
/// "reduce" (finishing the gradient sync), "optimizer".
struct StepTimes {
  std::map<std::string, double> seconds;
};

/// Called at the end of each phase with its name (bench/step_profile counts ops per phase).
using StepPhaseHook = std::function<void(const char* phase)>;

/// What a step returns. Tensors stay on the device (reading them is a host sync: the job
/// does so on log steps only).
struct StepResult {
  at::Tensor loss_sum;   ///< 0-dim fp32: this rank's summed CE over its masked tokens
  at::Tensor grad_norm;  ///< 0-dim fp32: pre-clip global L2 norm of the unscaled grads (inf/NaN: skipped)
  at::Tensor found_inf;  ///< (1,) fp32: 1 when the step was skipped (inf/NaN grads)
  double lr = 0;         ///< the learning rate this step used
};

class StepRunner {
 public:
  /// `net` is on context.device(); its parameters must already hold rank 0's values on
  /// every rank. Builds the optimizer (cfg.optimizer), the loss scaler (cfg.precision), the
  /// LR schedule and the DDP wrapper (cfg.dist). Throws tupe::Error on bad options.
  StepRunner(model::TupeBertImpl& net, dist::DistContext& context, const PretrainConfig& cfg, int64_t accumulation,
             int64_t micro_batch);

  /// Runs optimizer step `step` (1-based) on this rank's batch (on the host; copied here).
  /// `scheduler_step` is the number of LR-schedule steps before it (the LR is
  /// lr(scheduler_step + 1)); it advances by one, applied or skipped (optimizer_step.h's
  /// rule). `times` and `hook` may be null/empty (with them, phases are timed on the host:
  /// on a GPU the hook must synchronise for the times to mean anything).
  StepResult run(const data_pipeline::Batch& batch, int64_t step, int64_t& scheduler_step, StepTimes* times = nullptr,
                 const StepPhaseHook& hook = {});

  trainer::Optimizer& optimizer() { return *optimizer_; }
  trainer::DynamicLossScaler& scaler() { return scaler_; }
  const trainer::NamedTensors& parameters() const { return named_; }
  dist::DistributedDataParallel& ddp() { return *ddp_; }

 private:
  model::TupeBertImpl& net_;
  const c10::Device device_;
  const at::ScalarType amp_;
  const int64_t accumulation_, micro_batch_;
  const double clip_grad_norm_;
  trainer::NamedTensors named_;
  std::unique_ptr<trainer::Optimizer> optimizer_;
  trainer::DynamicLossScaler scaler_;
  trainer::LrSchedule schedule_;
  std::unique_ptr<dist::DistributedDataParallel> ddp_;
  std::unique_ptr<trainer::OptimizerStep> step_;
};

/// The autocast dtype of a precision: bf16, fp16, or float (fp32: autocast off).
at::ScalarType amp_dtype(trainer::Precision p);

/// Sum of the cross-entropy over the masked tokens of `b` (0-dim fp32 tensor), the forward
/// under autocast `amp` on b's device.
at::Tensor masked_lm_loss_sum(model::TupeBertImpl& net, const data_pipeline::Batch& b, at::ScalarType amp,
                              const c10::Device& device);

/// `b` with every tensor on `device` (non-blocking copies; pinned batches copy async).
data_pipeline::Batch to_device(const data_pipeline::Batch& b, const c10::Device& device);

}  // namespace tupe::pretrain
