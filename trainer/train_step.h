// One optimizer step of data-parallel training: the one place where both jobs (pre-training,
// trainer/pretrain/; fine-tuning, trainer/finetune/) run micro-batches, no-sync, dropout
// seeding, loss normalisation, the gradient sync, the optimizer step and the LR schedule.
// The job supplies only its loss, as a callback per micro-batch (docs/architecture.md
// "One training step").
//
// Step t (1-based) on rank r of W, with k_r micro-batches on this rank (k_r may differ
// between ranks) and C the loss's count over the GLOBAL batch (masked tokens, examples):
//   1. dropout RNG seeded with step_seed(seed, t, r): a pure function of the step, so a
//      resumed run draws exactly what the straight run drew;
//   2. for m = 0 .. k_r - 1: l_m = loss(m) (the summed loss of micro-batch m);
//      backward of S * l_m / C (S = fp16 loss scale, else 1); gradients accumulate in the
//      flat DDP buffer, and only the last micro-batch's backward launches the bucket
//      all-reduces (SUM over ranks);
//   3. finish the gradient sync: g = sum over ranks and micro-batches of S dl_m/dtheta / C,
//      the gradient of the global mean loss whatever W and the split (docs/architecture.md
//      "Data parallel is exact");
//   4. the shared optimizer step at lr(scheduler step + 1) (optimizer_step.h: inf/NaN check,
//      unscale + clip, AdamW/LAMB, loss scaler, all on the device); both counters advance.
// No host sync: the result's tensors stay on the device until the job reads them.
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
#include "trainer/loss_scaler.h"
#include "trainer/lr_schedule.h"
#include "trainer/optimizer.h"
#include "trainer/optimizer_step.h"
#include "trainer/options.h"

namespace tupe::trainer {

/// The dropout seed of step `step` on rank `rank`: the SplitMix64 finaliser (common/mix64.h)
/// of seed * kGoldenGamma ^ step * 0xBF58476D1CE4E5B9 ^ (rank + 1) * 0x94D049BB133111EB.
uint64_t step_seed(int64_t seed, int64_t step, int rank);

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

/// The summed loss of micro-batch `m` (0-based) of this rank's share of the step: a 0-dim
/// fp32 tensor (float64 for a float64 model) on the step's device, differentiable, not yet divided by anything. The
/// callback runs the forward itself (under trainer::AutocastScope when it wants autocast).
using MicroBatchLoss = std::function<at::Tensor(int64_t m)>;

class TrainStep {
 public:
  /// `params`: the trainable parameters (leaf tensors on `device`, holding the same values on
  /// every rank; the optimizer updates them in place). Builds the optimizer, the loss scaler,
  /// the LR schedule and the DDP buckets on `comm` (which must outlive this object).
  /// Collective (every rank, same parameters). Throws tupe::Error on bad options.
  TrainStep(const checkpoint::NamedTensors& params, dist::Communicator& comm, const c10::Device& device,
            const TrainStepOptions& options);

  /// Runs step t = state().step + 1 over `micro_batches` (>= 1) micro-batches of this rank,
  /// normalised by `global_count` (> 0, the same on every rank). Collective. `times` and
  /// `hook` may be null/empty (with them, phases are timed on the host: on a GPU the hook
  /// must synchronise for the times to mean anything). Throws tupe::Error for bad counts, or
  /// what the callback, the sync or the optimizer throw.
  StepResult run(int64_t micro_batches, double global_count, const MicroBatchLoss& loss, StepTimes* times = nullptr,
                 const StepPhaseHook& hook = {});

  /// The counters and the loss scaler (the scaler's values are read from the device: a host
  /// sync). For checkpoints.
  TrainStepState state() const;
  /// Restores state(); throws tupe::Error for negative counters or an invalid scaler state.
  void load_state(const TrainStepState& state);
  /// Optimizer steps completed (no host sync).
  int64_t step() const { return step_; }

  /// The device of the parameters, gradients and loss.
  const c10::Device& device() const { return device_; }
  Optimizer& optimizer() { return *optimizer_; }
  DynamicLossScaler& scaler() { return scaler_; }
  const LrSchedule& schedule() const { return schedule_; }
  dist::DistributedDataParallel& ddp() { return *ddp_; }
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
  int64_t step_ = 0, scheduler_step_ = 0;
};

}  // namespace tupe::trainer
