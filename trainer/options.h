// Options of the trainer's building blocks, one plain struct per INI section. Every field --
// its meaning, unit, default and range -- is described once, in the struct's field table in
// options.cpp (common/config_fields.h; `tupe pretrain --help` prints it, docs/config.md lists
// it). The defaults are the paper's pre-training setting (docs/model.md "The paper's
// settings"). validate() is pure and throws tupe::Error "<section>.<key>: <cause>".
#pragma once
#include <cstdint>
#include <string>

#include "common/config_fields.h"

namespace tupe::trainer {

enum class OptimizerKind {
  kAdamW,  ///< Adam with decoupled weight decay (Loshchilov & Hutter), as torch.optim.AdamW
  kLamb,   ///< LAMB (You et al. 2020) as in NVIDIA's BERT recipe: per-parameter trust ratio
};
inline constexpr Choice<OptimizerKind> kOptimizerKindWords[] = {{"adamw", OptimizerKind::kAdamW},
                                                               {"lamb", OptimizerKind::kLamb}};

enum class ScheduleKind {
  kLinear,      ///< linear warm-up, then linear decay to 0 at total_steps
  kPolynomial,  ///< linear warm-up, then (1 - progress)^power decay to 0 at total_steps
};
inline constexpr Choice<ScheduleKind> kScheduleKindWords[] = {{"linear", ScheduleKind::kLinear},
                                                             {"polynomial", ScheduleKind::kPolynomial}};

enum class Precision {
  kFp32,  ///< everything in float32
  kBf16,  ///< bfloat16 autocast, fp32 master weights, no loss scaling
  kFp16,  ///< float16 autocast, fp32 master weights, dynamic loss scaling
  kAuto,  ///< bf16 on a GPU (fp16 on one without bf16), fp32 on the CPU (resolve_precision; fine-tuning's default)
};
inline constexpr Choice<Precision> kPrecisionWords[] = {
    {"fp32", Precision::kFp32}, {"bf16", Precision::kBf16}, {"fp16", Precision::kFp16}, {"auto", Precision::kAuto}};
/// "fp32" | "bf16" | "fp16" | "auto".
std::string to_string(Precision p);
/// The precision a job runs with, resolved ONCE at set-up (every job passes this value down:
/// autocast and the loss scaler read it and nothing else; they refuse kAuto). auto -> bf16 on a
/// GPU with bfloat16 (compute capability 8.0 and later), fp16 with dynamic loss scaling on an
/// older GPU, fp32 on the CPU; the others as they are. `on_cuda`: the job's device is a GPU;
/// `bf16_supported`: that GPU has bfloat16 (dist::cuda_bf16_supported). Throws tupe::Error
/// "precision.precision: fp16 with loss scaling is for GPUs; ..." for fp16 on the CPU.
Precision resolve_precision(Precision p, bool on_cuda, bool bf16_supported = true);

/// [optimizer] section: the optimizer, its LR schedule and gradient clipping.
struct OptimizerOptions {
  OptimizerOptions() { fields().reset(*this); }
  OptimizerKind optimizer;
  double lr;
  double beta1;
  double beta2;
  double eps;
  double weight_decay;
  int64_t warmup_steps;
  int64_t total_steps;
  ScheduleKind schedule;
  double power;
  double clip_grad_norm;

  /// The field table's ranges, and warmup_steps <= total_steps.
  void validate() const;
  static const FieldTable<OptimizerOptions>& fields();
};

/// [precision] section: the autocast dtype and the fp16 loss scaler (pre-training,
/// fine-tuning; evaluation reads its precision). The table's default precision is fp16,
/// pre-training's (the paper's); fine-tuning and evaluation start from auto
/// (default_finetune_precision).
struct PrecisionOptions {
  PrecisionOptions() { fields().reset(*this); }
  Precision precision;
  double initial_scale;
  double growth_factor;
  double backoff_factor;
  int64_t growth_interval;
  int64_t max_consecutive_skips;

  void validate() const;
  static const FieldTable<PrecisionOptions>& fields();
};

/// The [precision] defaults of fine-tuning and evaluation: the table's, with precision auto.
PrecisionOptions default_finetune_precision();

}  // namespace tupe::trainer
