#include "trainer/options.h"

#include "common/error.h"

namespace tupe::trainer {

std::string to_string(Precision p) { return choice_word(p, kPrecisionWords); }

Precision resolve_precision(Precision p, bool on_cuda, bool bf16_supported) {
  if (p == Precision::kAuto) return on_cuda ? (bf16_supported ? Precision::kBf16 : Precision::kFp16) : Precision::kFp32;
  TUPE_CHECK(p != Precision::kFp16 || on_cuda,
             "precision.precision: fp16 with loss scaling is for GPUs; use bf16, fp32 or auto on the CPU");
  return p;
}

PrecisionOptions default_finetune_precision() {
  PrecisionOptions o;
  o.precision = Precision::kAuto;
  return o;
}

void OptimizerOptions::validate() const {
  fields().check(*this);
  TUPE_CHECK(warmup_steps <= total_steps,
             "optimizer.warmup_steps: must be in [0, total_steps = " << total_steps << "], got " << warmup_steps);
}

const FieldTable<OptimizerOptions>& OptimizerOptions::fields() {
  using O = OptimizerOptions;
  static const FieldTable<O> table = [] {
    FieldTable<O> t("optimizer");
    t.choice("optimizer", &O::optimizer, kOptimizerKindWords, OptimizerKind::kAdamW,
             "AdamW, or LAMB (per-parameter trust ratio, NVIDIA's BERT recipe)")
        .real("lr", &O::lr, 1e-4, "", "peak learning rate, reached at the end of warm-up")
        .positive()
        .real("beta1", &O::beta1, 0.9, "", "Adam first-moment decay")
        .at_least(0)
        .below(1)
        .real("beta2", &O::beta2, 0.999, "", "Adam second-moment decay")
        .at_least(0)
        .below(1)
        .real("eps", &O::eps, 1e-6, "", "Adam epsilon, added to sqrt(v_hat) in the denominator")
        .positive()
        .real("weight_decay", &O::weight_decay, 0.01, "", "decoupled weight decay (none on biases and LayerNorm weights)")
        .at_least(0)
        .integer("warmup_steps", &O::warmup_steps, 10000, "optimizer steps", "linear warm-up from 0 to lr (<= total_steps)")
        .at_least(0)
        .integer("total_steps", &O::total_steps, 1000000, "optimizer steps", "length of the run; the LR reaches 0 here")
        .positive()
        .choice("schedule", &O::schedule, kScheduleKindWords, ScheduleKind::kLinear,
                "decay after warm-up: linear, or (1 - progress)^power")
        .real("power", &O::power, 1.0, "", "exponent of the polynomial decay (1 = linear)")
        .positive()
        .real("clip_grad_norm", &O::clip_grad_norm, 1.0, "", "max global L2 norm of the gradients; 0 = no clipping")
        .at_least(0);
    return t;
  }();
  return table;
}

void PrecisionOptions::validate() const { fields().check(*this); }

const FieldTable<PrecisionOptions>& PrecisionOptions::fields() {
  using P = PrecisionOptions;
  static const FieldTable<P> table = [] {
    FieldTable<P> t("precision");
    t.choice("precision", &P::precision, kPrecisionWords, Precision::kFp16,
             "fp32, bf16 autocast, fp16 autocast with dynamic loss scaling (the paper: fp16), or auto (bf16 on a "
             "GPU, fp16 on a GPU without bf16, fp32 on the CPU; fine-tuning's and evaluation's default)")
        .real("initial_scale", &P::initial_scale, 65536.0, "factor", "initial fp16 loss scale (2^16)")
        .positive()
        .real("growth_factor", &P::growth_factor, 2.0, "factor",
              "loss-scale multiplier after growth_interval finite steps")
        .above(1)
        .real("backoff_factor", &P::backoff_factor, 0.5, "factor",
              "loss-scale multiplier on a step with inf/NaN gradients")
        .above(0)
        .below(1)
        .integer("growth_interval", &P::growth_interval, 2000, "optimizer steps",
                 "consecutive finite steps before the scale grows")
        .positive()
        .integer("max_consecutive_skips", &P::max_consecutive_skips, 30, "optimizer steps",
                 "consecutive skipped (inf/NaN) steps that abort the run (30 halvings take 2^16 below 1e-4, "
                 "fairseq's minimum loss scale)")
        .positive();
    return t;
  }();
  return table;
}

}  // namespace tupe::trainer
