// LR schedules against their closed form, the shared optimizer step's normalise + unscale +
// clip against a float64 two-pass reference, the dynamic loss scaler's
// skip/backoff/growth/divergence rules with the shared optimizer step
// (trainer/optimizer_step.h), and the options structs.
#include <cmath>
#include <limits>

#include "checkpoint/checkpoint_options.h"
#include "common/error.h"
#include "tests/trainer/test_util.h"
#include "trainer/autocast.h"
#include "trainer/loss_scaler.h"
#include "trainer/lr_schedule.h"
#include "trainer/optimizer.h"
#include "trainer/optimizer_step.h"
#include "trainer/options.h"

namespace tupe::trainer {
namespace {

// ---- LR schedule ---------------------------------------------------------------------

TEST(TrainerLrSchedule, LinearWarmupThenLinearDecayToZero) {
  const double peak = 1e-4;
  const LrSchedule s(peak, 100, 1000, ScheduleKind::kLinear);
  for (int64_t step : {1, 2, 37, 99, 100}) EXPECT_DOUBLE_EQ(s.lr(step), peak * step / 100.0) << step;
  for (int64_t step : {101, 500, 999}) EXPECT_DOUBLE_EQ(s.lr(step), peak * (1000.0 - step) / 900.0) << step;
  EXPECT_DOUBLE_EQ(s.lr(100), peak);  // the peak at the end of warm-up
  EXPECT_EQ(s.lr(1000), 0.0);
  EXPECT_EQ(s.lr(5000), 0.0);
  // Monotone up, then monotone down.
  for (int64_t step = 2; step <= 100; ++step) EXPECT_GT(s.lr(step), s.lr(step - 1));
  for (int64_t step = 101; step <= 1000; ++step) EXPECT_LT(s.lr(step), s.lr(step - 1));
}

TEST(TrainerLrSchedule, PolynomialDecayAndEdgeCases) {
  const LrSchedule s(2e-3, 10, 110, ScheduleKind::kPolynomial, 2.0);
  EXPECT_DOUBLE_EQ(s.lr(5), 2e-3 * 0.5);
  EXPECT_DOUBLE_EQ(s.lr(60), 2e-3 * 0.25);  // ((110 - 60) / 100)^2
  EXPECT_DOUBLE_EQ(s.lr(35), 2e-3 * std::pow(0.75, 2.0));
  EXPECT_EQ(s.lr(110), 0.0);
  // power 1 equals the linear schedule.
  const LrSchedule p1(1.0, 3, 20, ScheduleKind::kPolynomial, 1.0), lin(1.0, 3, 20, ScheduleKind::kLinear);
  for (int64_t step = 1; step <= 25; ++step) EXPECT_DOUBLE_EQ(p1.lr(step), lin.lr(step)) << step;
  // No warm-up: the first update already decays from the peak.
  const LrSchedule nw(1.0, 0, 4, ScheduleKind::kLinear);
  EXPECT_DOUBLE_EQ(nw.lr(1), 0.75);
  // From the options (the paper's setting).
  const LrSchedule paper{OptimizerOptions{}};
  EXPECT_DOUBLE_EQ(paper.lr(10000), 1e-4);
  EXPECT_DOUBLE_EQ(paper.lr(505000), 0.5e-4);
  EXPECT_THROW(s.lr(0), Error);
  EXPECT_THROW(LrSchedule(1.0, 11, 10, ScheduleKind::kLinear), Error);
  EXPECT_THROW(LrSchedule(0.0, 1, 10, ScheduleKind::kLinear), Error);
}

// ---- Loss scaler and the shared optimizer step ------------------------------------------

/// The global count C as the step passes it: [1] float64.
at::Tensor count(double c) { return at::full({1}, c, at::kDouble); }

PrecisionOptions fp16_options() {
  PrecisionOptions o;
  o.precision = Precision::kFp16;
  o.initial_scale = 65536.0;
  o.growth_interval = 3;
  o.max_consecutive_skips = 4;
  return o;
}

at::Tensor flag(bool inf) { return at::full({1}, inf ? 1.0 : 0.0); }

/// Parameters whose grads are views of one flat buffer, as DDP lays them out.
struct FlatParams {
  at::Tensor flat;
  checkpoint::NamedTensors params;
  explicit FlatParams(const std::vector<int64_t>& sizes) {
    int64_t total = 0;
    for (int64_t n : sizes) total += n;
    flat = at::zeros({total});
    int64_t offset = 0;
    for (size_t i = 0; i < sizes.size(); ++i) {
      at::Tensor p = at::ones({sizes[i]});
      p.set_requires_grad(true);
      p.mutable_grad() = flat.narrow(0, offset, sizes[i]);
      offset += sizes[i];
      params.emplace_back("w" + std::to_string(i), p);
    }
  }
};

TEST(TrainerLossScaler, InfGradientsSkipTheStepOnTheDeviceAndHalveTheScale) {
  DynamicLossScaler scaler(fp16_options());
  EXPECT_EQ(scaler.scale(), 65536.0);
  EXPECT_EQ(scaler.scale_loss(at::full({}, 0.5)).item<double>(), 32768.0);
  FlatParams fp({3});
  OptimizerOptions oo;
  oo.clip_grad_norm = 0;
  AdamW opt(fp.params, oo);
  const LrSchedule schedule(1e-3, 0, 100, ScheduleKind::kLinear);
  OptimizerStep step(opt, scaler, schedule, 0.0);

  // Finite scaled grads are divided by the scale and applied.
  fp.flat.fill_(65536.0 * 0.25);
  StepResult out = step.apply(fp.flat, 1, count(1));
  EXPECT_EQ(out.found_inf.item<float>(), 0.0f);
  EXPECT_TRUE(at::equal(fp.flat, at::full({3}, 0.25)));
  EXPECT_FLOAT_EQ(out.grad_norm.item<float>(), 0.25f * std::sqrt(3.0f));
  EXPECT_LT(fp.params[0].second[0].item<double>(), 1.0);

  // Injected inf (and NaN): the step is skipped, the weights and moments stay, the scale halves.
  for (float bad : {std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()}) {
    const at::Tensor before = fp.params[0].second.detach().clone();
    const auto moments_before = opt.state_dict();
    const double scale_before = scaler.scale();
    fp.flat.fill_(1.0);
    fp.flat[1] = bad;
    out = step.apply(fp.flat, 2, count(1));
    EXPECT_EQ(out.found_inf.item<float>(), 1.0f);
    EXPECT_TRUE(testing::bitwise_equal(fp.params[0].second.detach(), before));
    const auto moments_after = opt.state_dict();
    for (size_t k = 0; k < moments_before.tensors.size(); ++k)
      EXPECT_TRUE(testing::bitwise_equal(moments_after.tensors[k].second, moments_before.tensors[k].second))
          << moments_before.tensors[k].first;
    EXPECT_EQ(scaler.scale(), scale_before * 0.5);
    EXPECT_EQ(scaler.state().growth_tracker, 0);
  }
  EXPECT_EQ(scaler.state().consecutive_skips, 2);
  EXPECT_EQ(scaler.state().total_skips, 2);
}

TEST(TrainerLossScaler, OneMultiplyEqualsNormaliseUnscaleThenClip) {
  // The reference is the two-pass procedure in float64: g / (S C), then torch's clip rule.
  for (const double C : {1.0, 37.0, 19661.0})
    for (double max_norm : {1.0, 1e6, 0.0}) {    // clipping active; inactive; off
      DynamicLossScaler scaler(fp16_options());  // S = 65536
      const double S = scaler.scale();
      FlatParams fp({210, 7, 27});
      at::manual_seed(17);
      fp.flat.copy_(at::randn({244}) * (S * C * 3.0));
      const at::Tensor unscaled = fp.flat.to(at::kDouble) / (S * C);
      const double norm = unscaled.norm().item<double>();
      const double c = max_norm > 0 && norm > max_norm ? max_norm / (norm + 1e-6) : 1.0;
      OptimizerOptions oo;
      AdamW opt(fp.params, oo);
      const LrSchedule schedule(0.0 + 1e-9, 0, 100, ScheduleKind::kLinear);
      OptimizerStep step(opt, scaler, schedule, max_norm);
      const StepResult out = step.apply(fp.flat, 1, count(C));
      EXPECT_NEAR(out.grad_norm.item<double>(), norm, 1e-6 * norm) << max_norm << " C " << C;
      EXPECT_EQ(out.count.item<double>(), C);
      const double err = (fp.flat.to(at::kDouble) - unscaled * c).abs().max().item<double>() /
                         (unscaled * c).abs().max().item<double>();
      EXPECT_LE(err, 3e-7) << max_norm << " C " << C;  // float32 rounding of 1 / (S C) and of one product
    }
  // S = 1 (bf16/fp32), C = 1 and no clipping: the multiply by exactly 1 leaves every bit.
  PrecisionOptions o;
  o.precision = Precision::kBf16;
  DynamicLossScaler one(o);
  FlatParams fp({5});
  fp.flat.copy_(at::randn({5}));
  const at::Tensor before = fp.flat.clone();
  AdamW opt(fp.params, OptimizerOptions{});
  const LrSchedule schedule(1e-3, 0, 100, ScheduleKind::kLinear);
  OptimizerStep(opt, one, schedule, 0.0).apply(fp.flat, 1, count(1));
  EXPECT_TRUE(testing::bitwise_equal(fp.flat, before));
}

TEST(TrainerLossScaler, GrowsAfterTheIntervalAndResetsOnOverflow) {
  DynamicLossScaler scaler(fp16_options());  // interval 3
  scaler.update(flag(false));
  scaler.update(flag(false));
  EXPECT_EQ(scaler.scale(), 65536.0);
  scaler.update(flag(false));
  EXPECT_EQ(scaler.scale(), 131072.0);
  EXPECT_EQ(scaler.state().growth_tracker, 0);
  scaler.update(flag(false));
  scaler.update(flag(false));
  scaler.update(flag(true));  // overflow halves and resets the tracker
  EXPECT_EQ(scaler.scale(), 65536.0);
  EXPECT_EQ(scaler.state().growth_tracker, 0);
  scaler.update(flag(false));
  scaler.update(flag(false));
  EXPECT_EQ(scaler.scale(), 65536.0);
  scaler.update(flag(false));
  EXPECT_EQ(scaler.scale(), 131072.0);
}

TEST(TrainerLossScaler, DivergenceCheckNamesTheStepAndCount) {
  DynamicLossScaler scaler(fp16_options());  // max 4 consecutive skips
  for (int i = 0; i < 3; ++i) scaler.update(flag(true));
  scaler.update(flag(false));  // a finite step ends the run
  for (int i = 0; i < 3; ++i) scaler.update(flag(true));
  EXPECT_NO_THROW(scaler.check_divergence(7));  // runs of 3: below the limit
  EXPECT_EQ(scaler.state().consecutive_skips, 3);
  scaler.update(flag(true));                    // the run reaches 4
  scaler.update(flag(false));                   // and recovers before the check: still caught
  try {
    scaler.check_divergence(9);
    FAIL() << "no abort after 4 consecutive skips";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("by step 9: 4 consecutive steps had inf/NaN gradients"), std::string::npos) << msg;
    EXPECT_NE(msg.find("in the last 2 steps"), std::string::npos) << msg;
    EXPECT_NE(msg.find("max_consecutive_skips = 4"), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos);
  }
  EXPECT_NO_THROW(scaler.check_divergence(10));  // a new window
}

TEST(TrainerLossScaler, Bf16KeepsScaleOneButStillSkipsAndStateRoundTrips) {
  PrecisionOptions o = fp16_options();
  o.precision = Precision::kBf16;
  DynamicLossScaler bf16(o);
  EXPECT_FALSE(bf16.scaling_enabled());
  bf16.update(flag(true));
  EXPECT_EQ(bf16.scale(), 1.0);
  EXPECT_EQ(bf16.state().total_skips, 1);
  EXPECT_EQ(bf16.scale_loss(at::full({}, 0.5)).item<double>(), 0.5);

  DynamicLossScaler a(fp16_options()), b(fp16_options());
  a.update(flag(true));
  a.update(flag(false));
  b.load_state(a.state());
  EXPECT_EQ(b.scale(), 32768.0);
  EXPECT_EQ(b.state().growth_tracker, 1);
  EXPECT_EQ(b.state().total_skips, 1);
  EXPECT_EQ(b.state().consecutive_skips, 0);
  checkpoint::LossScalerState bad = a.state();
  bad.scale = 0;
  EXPECT_THROW(b.load_state(bad), Error);
}

TEST(TrainerOptimizerStep, LrCountsEveryStepAppliedOrSkipped) {
  DynamicLossScaler scaler(fp16_options());
  FlatParams fp({4});
  AdamW opt(fp.params, OptimizerOptions{});
  const LrSchedule schedule(1.0, 4, 8, ScheduleKind::kLinear);
  OptimizerStep step(opt, scaler, schedule, 1.0);
  for (int64_t t = 1; t <= 6; ++t) {
    fp.flat.fill_(t == 3 ? std::numeric_limits<float>::infinity() : 1.0f);
    EXPECT_DOUBLE_EQ(step.apply(fp.flat, t, count(2)).lr, schedule.lr(t)) << t;  // step 3 skipped, the LR goes on
  }
  EXPECT_THROW(step.apply(fp.flat, 0, count(2)), Error);
  EXPECT_THROW(step.apply(fp.flat, 7, at::Tensor()), Error);               // no count
  EXPECT_THROW(step.apply(fp.flat, 7, at::ones({1}, at::kFloat)), Error);  // a float32 count
}

TEST(TrainerOptimizerStep, AGlobalCountOfZeroSkipsTheStepOnTheDevice) {
  // Nothing to learn from (no masked token, no example on any rank): 0 / 0 is not finite,
  // so the step is skipped like an overflow and counted; the weights and moments keep their bits.
  PrecisionOptions o;
  o.precision = Precision::kFp32;
  DynamicLossScaler scaler(o);
  FlatParams fp({6});
  AdamW opt(fp.params, OptimizerOptions{});
  const LrSchedule schedule(1e-3, 0, 10, ScheduleKind::kLinear);
  OptimizerStep step(opt, scaler, schedule, 1.0);
  fp.flat.zero_();  // summed over no terms
  const at::Tensor before = fp.params[0].second.detach().clone();
  const StepResult out = step.apply(fp.flat, 1, count(0));
  EXPECT_EQ(out.found_inf.item<float>(), 1.0f);
  EXPECT_TRUE(testing::bitwise_equal(fp.params[0].second.detach(), before));
  EXPECT_EQ(scaler.state().total_skips, 1);
}

// ---- Options -------------------------------------------------------------------------

TEST(TrainerOptions, PaperDefaultsRoundTripAndValidationNamesTheKey) {
  const OptimizerOptions o;
  EXPECT_EQ(o.optimizer, OptimizerKind::kAdamW);
  EXPECT_EQ(o.lr, 1e-4);
  EXPECT_EQ(o.beta1, 0.9);
  EXPECT_EQ(o.beta2, 0.999);
  EXPECT_EQ(o.eps, 1e-6);
  EXPECT_EQ(o.weight_decay, 0.01);
  EXPECT_EQ(o.warmup_steps, 10000);
  EXPECT_EQ(o.total_steps, 1000000);
  EXPECT_EQ(o.clip_grad_norm, 1.0);
  EXPECT_EQ(PrecisionOptions{}.precision, Precision::kFp16);
  EXPECT_EQ(PrecisionOptions{}.initial_scale, 65536.0);

  const KeyValues kv = OptimizerOptions::fields().to_kv(o);
  EXPECT_EQ(kv.at("optimizer"), "adamw");
  EXPECT_EQ(kv.at("schedule"), "linear");
  OptimizerOptions parsed;
  OptimizerOptions::fields().apply(parsed, {{"optimizer", "lamb"}, {"lr", "0.00176"}, {"schedule", "polynomial"}},
                                   "test");
  EXPECT_EQ(parsed.optimizer, OptimizerKind::kLamb);
  EXPECT_EQ(parsed.lr, 0.00176);
  EXPECT_THROW(OptimizerOptions::fields().apply(parsed, {{"optimizer", "sgd"}}, "test"), Error);
  EXPECT_EQ(PrecisionOptions::fields().to_kv(PrecisionOptions{}).at("precision"), "fp16");
  EXPECT_EQ(checkpoint::CheckpointOptions::fields().to_kv(checkpoint::CheckpointOptions{}).at("keep_every"), "100000");

  auto message = [](auto&& options) {
    try {
      options.validate();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  OptimizerOptions bad_warmup;
  bad_warmup.warmup_steps = bad_warmup.total_steps + 1;
  EXPECT_EQ(message(bad_warmup).rfind("optimizer.warmup_steps:", 0), 0u);
  PrecisionOptions bad_interval;
  bad_interval.growth_interval = 0;
  EXPECT_EQ(message(bad_interval).rfind("precision.growth_interval:", 0), 0u);
  checkpoint::CheckpointOptions bad_keep;
  bad_keep.keep_last = -1;
  EXPECT_EQ(message(bad_keep).rfind("checkpoint.keep_last:", 0), 0u);
}

TEST(TrainerOptions, PrecisionAutoResolvesByDeviceAndFp16NeedsAGpu) {
  // auto: bf16 on a GPU, fp32 on the CPU (fine-tuning's and evaluation's default); the
  // others are what they say, and fp16 (loss scaling) is refused on the CPU in one line.
  EXPECT_EQ(resolve_precision(Precision::kAuto, true), Precision::kBf16);
  EXPECT_EQ(resolve_precision(Precision::kAuto, false), Precision::kFp32);
  for (const Precision p : {Precision::kFp32, Precision::kBf16}) {
    EXPECT_EQ(resolve_precision(p, false), p);
    EXPECT_EQ(resolve_precision(p, true), p);
  }
  EXPECT_EQ(resolve_precision(Precision::kFp16, true), Precision::kFp16);
  try {
    resolve_precision(Precision::kFp16, false);
    FAIL() << "fp16 accepted on the CPU";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("precision.precision: fp16 with loss scaling is for GPUs", 0), 0u)
        << e.what();
  }
  EXPECT_EQ(default_finetune_precision().precision, Precision::kAuto);
  EXPECT_EQ(default_finetune_precision().initial_scale, PrecisionOptions{}.initial_scale);
  PrecisionOptions parsed;
  PrecisionOptions::fields().apply(parsed, {{"precision", "auto"}}, "test");
  EXPECT_EQ(parsed.precision, Precision::kAuto);
  EXPECT_EQ(to_string(Precision::kAuto), "auto");
  EXPECT_THROW(autocast_dtype(Precision::kAuto), Error);  // resolved first, always
  EXPECT_EQ(autocast_dtype(Precision::kFp16), at::kHalf);
}

}  // namespace
}  // namespace tupe::trainer
