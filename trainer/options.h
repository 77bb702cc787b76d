// Options of the trainer's building blocks, one plain struct per INI section, with the
// defaults of the paper's pre-training setting (../shared/TUPE.md "Pre-training setting of
// the paper": Adam (0.9, 0.999), eps 1e-6, weight decay 0.01, peak LR 1e-4 after 10k
// linear warm-up steps, linear decay to 0 at 1M steps, clip 1.0, fp16 mixed precision).
// validate() is pure and throws tupe::Error "<section>.<key>: <cause>".
#pragma once
#include <cstdint>
#include <string>

#include "common/config_fields.h"

namespace tupe::trainer {

enum class OptimizerKind {
  kAdamW,  ///< Adam with decoupled weight decay (Loshchilov & Hutter), as torch.optim.AdamW
  kLamb,   ///< LAMB (You et al. 2020) as in NVIDIA's BERT recipe: per-parameter trust ratio
};
std::string to_string(OptimizerKind k);
/// "adamw" | "lamb"; throws tupe::Error naming the key otherwise.
OptimizerKind parse_optimizer_kind(const std::string& text);

enum class ScheduleKind {
  kLinear,      ///< linear warm-up, then linear decay to 0 at total_steps
  kPolynomial,  ///< linear warm-up, then (1 - progress)^power decay to 0 at total_steps
};
std::string to_string(ScheduleKind k);
ScheduleKind parse_schedule_kind(const std::string& text);

/// [optimizer] section.
struct OptimizerOptions {
  OptimizerKind optimizer = OptimizerKind::kAdamW;  ///< adamw | lamb
  double lr = 1e-4;               ///< peak learning rate, reached at the end of warm-up
  double beta1 = 0.9;             ///< first-moment decay
  double beta2 = 0.999;           ///< second-moment decay
  double eps = 1e-6;              ///< added to sqrt(v_hat) in the denominator
  double weight_decay = 0.01;     ///< decoupled weight decay (not on biases and LayerNorm weights)
  int64_t warmup_steps = 10000;   ///< optimizer steps of linear warm-up from 0 to lr
  int64_t total_steps = 1000000;  ///< optimizer steps of the run; the LR reaches 0 here
  ScheduleKind schedule = ScheduleKind::kLinear;  ///< linear | polynomial decay after warm-up
  double power = 1.0;             ///< exponent of the polynomial decay (1 = linear)
  double clip_grad_norm = 1.0;    ///< max global L2 norm of the gradients; 0 = no clipping

  void validate() const;
  static const FieldTable<OptimizerOptions>& fields();
};

enum class Precision {
  kFp32,  ///< everything in float32
  kBf16,  ///< bfloat16 autocast, fp32 master weights, no loss scaling
  kFp16,  ///< float16 autocast, fp32 master weights, dynamic loss scaling
};
std::string to_string(Precision p);
Precision parse_precision(const std::string& text);

/// [precision] section.
struct PrecisionOptions {
  Precision precision = Precision::kFp16;  ///< fp32 | bf16 | fp16 (the paper: fp16)
  double initial_scale = 65536.0;          ///< initial fp16 loss scale (2^16)
  double growth_factor = 2.0;              ///< scale multiplier after growth_interval clean steps
  double backoff_factor = 0.5;             ///< scale multiplier on a step with inf/NaN gradients
  int64_t growth_interval = 2000;          ///< consecutive finite steps before the scale grows
  /// Consecutive skipped (inf/NaN) steps that abort the run; 30 halvings take 2^16 below
  /// 1e-4, fairseq's minimum loss scale.
  int64_t max_consecutive_skips = 30;

  void validate() const;
  static const FieldTable<PrecisionOptions>& fields();
};

}  // namespace tupe::trainer
