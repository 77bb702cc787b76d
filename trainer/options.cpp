#include "trainer/options.h"

#include "common/error.h"

namespace tupe::trainer {

std::string to_string(OptimizerKind k) { return k == OptimizerKind::kAdamW ? "adamw" : "lamb"; }

OptimizerKind parse_optimizer_kind(const std::string& text) {
  if (text == "adamw") return OptimizerKind::kAdamW;
  if (text == "lamb") return OptimizerKind::kLamb;
  TUPE_FAIL("key 'optimizer': expected adamw or lamb, got '" << text << "'");
}

std::string to_string(ScheduleKind k) { return k == ScheduleKind::kLinear ? "linear" : "polynomial"; }

ScheduleKind parse_schedule_kind(const std::string& text) {
  if (text == "linear") return ScheduleKind::kLinear;
  if (text == "polynomial") return ScheduleKind::kPolynomial;
  TUPE_FAIL("key 'schedule': expected linear or polynomial, got '" << text << "'");
}

std::string to_string(Precision p) {
  switch (p) {
    case Precision::kFp32: return "fp32";
    case Precision::kBf16: return "bf16";
    case Precision::kFp16: return "fp16";
  }
  return "?";
}

Precision parse_precision(const std::string& text) {
  for (auto p : {Precision::kFp32, Precision::kBf16, Precision::kFp16})
    if (text == to_string(p)) return p;
  TUPE_FAIL("key 'precision': expected fp32, bf16 or fp16, got '" << text << "'");
}

void OptimizerOptions::validate() const {
  TUPE_CHECK(lr > 0, "optimizer.lr: must be positive, got " << lr);
  TUPE_CHECK(beta1 >= 0 && beta1 < 1, "optimizer.beta1: must be in [0, 1), got " << beta1);
  TUPE_CHECK(beta2 >= 0 && beta2 < 1, "optimizer.beta2: must be in [0, 1), got " << beta2);
  TUPE_CHECK(eps > 0, "optimizer.eps: must be positive, got " << eps);
  TUPE_CHECK(weight_decay >= 0, "optimizer.weight_decay: must be >= 0, got " << weight_decay);
  TUPE_CHECK(total_steps > 0, "optimizer.total_steps: must be positive, got " << total_steps);
  TUPE_CHECK(warmup_steps >= 0 && warmup_steps <= total_steps,
             "optimizer.warmup_steps: must be in [0, total_steps = " << total_steps << "], got " << warmup_steps);
  TUPE_CHECK(power > 0, "optimizer.power: must be positive, got " << power);
  TUPE_CHECK(clip_grad_norm >= 0, "optimizer.clip_grad_norm: must be >= 0 (0 = off), got " << clip_grad_norm);
}

const FieldTable<OptimizerOptions>& OptimizerOptions::fields() {
  using O = OptimizerOptions;
  static const FieldTable<O> table = [] {
    FieldTable<O> t;
    t.custom(
         "optimizer", "adamw | lamb (LAMB: per-parameter trust ratio, NVIDIA's BERT recipe)",
         [](const O& o) { return to_string(o.optimizer); },
         [](O& o, const std::string& v) { o.optimizer = parse_optimizer_kind(v); })
        .real("lr", &O::lr, "peak learning rate, reached after warm-up")
        .real("beta1", &O::beta1, "Adam first-moment decay")
        .real("beta2", &O::beta2, "Adam second-moment decay")
        .real("eps", &O::eps, "Adam epsilon, added to sqrt(v_hat)")
        .real("weight_decay", &O::weight_decay, "decoupled weight decay (none on biases and LayerNorm weights)")
        .integer("warmup_steps", &O::warmup_steps, "linear warm-up length (optimizer steps)")
        .integer("total_steps", &O::total_steps, "run length (optimizer steps); the LR decays to 0 here")
        .custom(
            "schedule", "linear | polynomial: decay after warm-up",
            [](const O& o) { return to_string(o.schedule); },
            [](O& o, const std::string& v) { o.schedule = parse_schedule_kind(v); })
        .real("power", &O::power, "exponent of the polynomial decay (1 = linear)")
        .real("clip_grad_norm", &O::clip_grad_norm, "max global L2 gradient norm; 0 = no clipping");
    return t;
  }();
  return table;
}

void PrecisionOptions::validate() const {
  TUPE_CHECK(initial_scale > 0, "precision.initial_scale: must be positive, got " << initial_scale);
  TUPE_CHECK(growth_factor > 1, "precision.growth_factor: must be > 1, got " << growth_factor);
  TUPE_CHECK(backoff_factor > 0 && backoff_factor < 1,
             "precision.backoff_factor: must be in (0, 1), got " << backoff_factor);
  TUPE_CHECK(growth_interval > 0, "precision.growth_interval: must be positive, got " << growth_interval);
  TUPE_CHECK(max_consecutive_skips > 0,
             "precision.max_consecutive_skips: must be positive, got " << max_consecutive_skips);
}

const FieldTable<PrecisionOptions>& PrecisionOptions::fields() {
  using P = PrecisionOptions;
  static const FieldTable<P> table = [] {
    FieldTable<P> t;
    t.custom(
         "precision", "fp32 | bf16 | fp16 (fp16: dynamic loss scaling)",
         [](const P& p) { return to_string(p.precision); },
         [](P& p, const std::string& v) { p.precision = parse_precision(v); })
        .real("initial_scale", &P::initial_scale, "initial fp16 loss scale (factor)")
        .real("growth_factor", &P::growth_factor, "loss-scale multiplier after growth_interval finite steps")
        .real("backoff_factor", &P::backoff_factor, "loss-scale multiplier on an inf/NaN step")
        .integer("growth_interval", &P::growth_interval, "consecutive finite steps before the scale grows (steps)")
        .integer("max_consecutive_skips", &P::max_consecutive_skips,
                 "consecutive inf/NaN (skipped) steps that abort the run (steps)");
    return t;
  }();
  return table;
}

}  // namespace tupe::trainer
