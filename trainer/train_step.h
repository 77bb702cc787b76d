// One optimizer step of data-parallel training: the one place where both jobs (pre-training,
// trainer/pretrain/; fine-tuning, trainer/finetune/) run micro-batches, no-sync, dropout
// seeding, loss normalisation, the gradient sync, the optimizer step and the LR schedule.
// The job supplies only its loss, as a callback per micro-batch that returns the loss SUMMED
// over the micro-batch's terms and their count (docs/architecture.md "One training step").
//
// Step t (1-based) on rank r of W, with k_r >= 0 micro-batches on this rank (k_r may differ
// between ranks; 0 = a rank without examples in this step):
//   1. dropout RNG seeded with step_seed(seed, t, r): a pure function of the step, so a
//      resumed run draws exactly what the straight run drew (pre-training keys its CPU
//      dropout by sample instead, sample_dropout_key: trainer/pretrain/step.h);
//   2. for m = 0 .. k_r - 1: (l_m, n_m) = loss(m), the summed loss of micro-batch m and its
//      count (masked tokens, examples); backward of S * l_m (S = fp16 loss scale, else 1);
//      gradients accumulate in the flat DDP buffer; before the last backward the rank's
//      count n_r = sum_m n_m starts its all-reduce, and the last backward launches the
//      bucket all-reduces (SUM over ranks). A rank with k_r = 0 joins with count 0 and a
//      zero gradient, without a forward;
//   3. finish the gradient sync: g = sum over ranks and micro-batches of S dl_m/dtheta and
//      C = sum over ranks of n_r (on the device, with the gradients; C is exact in float64);
//   4. the shared optimizer step at lr(scheduler step + 1) (optimizer_step.h): g / (S C) is
//      the gradient of the global MEAN loss whatever W and the split (docs/architecture.md
//      "Data parallel is exact"), then the inf/NaN check, clipping, AdamW/LAMB and the loss
//      scaler, all on the device; both counters advance. fairseq's trainer (the paper's code)
//      normalises the same way: gradients of the summed loss, divided after the all-reduce by
//      the all-reduced sample size.
// Trace ranges (dist/trace.h): "forward" and "backward" per micro-batch, "all-reduce bucket <i>"
// (dist/bucket.h), "gradient sync wait" (finish_grad_sync) and "optimizer".
// No host sync: the counts are host integers put on the device by a fill, C is read on the
// device, and the result's tensors stay there until the job reads them (on log steps).
#pragma once
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "checkpoint/named_tensors.h"
#include "dist/communicator.h"
#include "dist/ddp.h"
#include "dist/options.h"
#include "trainer/exposed_sync.h"
#include "trainer/loss_scaler.h"
#include "trainer/lr_schedule.h"
#include "trainer/optimizer.h"
#include "trainer/optimizer_step.h"
#include "trainer/options.h"

namespace tupe::trainer {

/// The dropout seed of step `step` on rank `rank`: the SplitMix64 finaliser (common/mix64.h)
/// of seed * kGoldenGamma ^ step * 0xBF58476D1CE4E5B9 ^ (rank + 1) * 0x94D049BB133111EB.
uint64_t step_seed(int64_t seed, int64_t step, int rank);

/// The key of step `step`'s sample-keyed dropout (model/dropout.h DropoutSampleKeys), the same
/// on every rank: hash_words({seed, 0x64726f70 ("drop"), step}) (common/mix64.h).
uint64_t sample_dropout_key(int64_t seed, int64_t step);

/// What differs between the jobs' steps.
struct TrainStepOptions {
  OptimizerOptions optimizer;  ///< kind, peak LR, schedule, clipping
  PrecisionOptions precision;  ///< fp32 | bf16 | fp16 (fp16: dynamic loss scaling)
  dist::DistOptions dist;      ///< gradient buckets and their wire dtype
  int64_t seed = 1;            ///< base of the per-step dropout seeds (step_seed)
};

/// The step's state besides the optimizer's tensors (those: optimizer().state_dict()).
struct TrainStepState {
  int64_t step = 0;            ///< optimizer steps completed (applied or skipped)
  int64_t scheduler_step = 0;  ///< LR-schedule steps completed; the next LR is lr(scheduler_step + 1)
  checkpoint::LossScalerState scaler;      ///< the fp16 loss scale and skip counters
};

/// Wall time of a step's phases (seconds): "forward" and "backward" (summed over
/// micro-batches), "reduce" (finishing the gradient sync), "optimizer".
struct StepTimes {
  std::map<std::string, double> seconds;
};

/// Called at the end of each phase with its name (bench/step_profile counts ops per phase).
using StepPhaseHook = std::function<void(const char* phase)>;

/// What the loss callback returns for one micro-batch.
struct MicroBatchLoss {
  /// The loss summed over the micro-batch's terms: a 0-dim fp32 tensor (float64 for a
  /// float64 model) on the step's device, differentiable, divided by nothing.
  at::Tensor sum;
  /// The number of terms in `sum` (masked tokens, examples; >= 0), known on the host.
  int64_t count = 0;
};

/// The loss of micro-batch `m` (0-based) of this rank's share of the step. The callback runs
/// the forward itself (under trainer::AutocastScope when it wants autocast).
using MicroBatchLossFn = std::function<MicroBatchLoss(int64_t m)>;

class TrainStep {
 public:
  /// `params`: the trainable parameters (leaf tensors on `device`, holding the same values on
  /// every rank; the optimizer updates them in place). Builds the optimizer, the loss scaler,
  /// the LR schedule and the DDP buckets on `comm` (which must outlive this object).
  /// Collective (every rank, same parameters). Throws tupe::Error on bad options.
  TrainStep(const checkpoint::NamedTensors& params, dist::Communicator& comm, const c10::Device& device,
            const TrainStepOptions& options);

  /// Runs step t = state().step + 1 over `micro_batches` (>= 0; 0: this rank has nothing in
  /// this step and only joins the sync) micro-batches of this rank, normalised by the sum
  /// over ranks of the counts the callback returns (a step whose global count is 0 is
  /// skipped on the device and counted like an overflow). Collective. `times` and `hook`
  /// may be null/empty (with them, phases are timed on the host: on a GPU the hook must
  /// synchronise for the times to mean anything). Throws tupe::Error for a negative
  /// micro-batch count, a negative count or an undefined loss from the callback, or what the
  /// callback, the sync or the optimizer throw.
  StepResult run(int64_t micro_batches, const MicroBatchLossFn& loss, StepTimes* times = nullptr,
                 const StepPhaseHook& hook = {});

  /// The counters and the loss scaler (the scaler's values are read from the device: a host
  /// sync). For checkpoints.
  TrainStepState state() const;
  /// Restores state(); throws tupe::Error for negative counters or an invalid scaler state.
  void load_state(const TrainStepState& state);
  /// Optimizer steps completed (no host sync).
  int64_t step() const { return step_; }
  /// The base of the dropout seeds (TrainStepOptions::seed).
  int64_t seed() const { return seed_; }

  /// The device of the parameters, gradients and loss.
  const c10::Device& device() const { return device_; }
  Optimizer& optimizer() { return *optimizer_; }
  DynamicLossScaler& scaler() { return scaler_; }
  const LrSchedule& schedule() const { return schedule_; }
  dist::DistributedDataParallel& ddp() { return *ddp_; }
  /// The exposed gradient-sync time of the steps run (trainer/exposed_sync.h).
  ExposedSyncTimer& exposed_sync() { return exposed_sync_; }
  const checkpoint::NamedTensors& parameters() const { return params_; }

 private:
  const c10::Device device_;
  const int rank_;
  const int64_t seed_;
  checkpoint::NamedTensors params_;
  std::unique_ptr<Optimizer> optimizer_;
  DynamicLossScaler scaler_;
  LrSchedule schedule_;
  std::unique_ptr<dist::DistributedDataParallel> ddp_;
  std::unique_ptr<OptimizerStep> optimizer_step_;
  ExposedSyncTimer exposed_sync_;
  int64_t step_ = 0, scheduler_step_ = 0;
};

}  // namespace tupe::trainer
