// LR schedules against their closed form, global gradient-norm clipping against a float64
// norm, the dynamic loss scaler's skip/backoff/growth/abort rules, and the options structs.
#include <cmath>
#include <limits>

#include "common/error.h"
#include "tests/trainer/test_util.h"
#include "trainer/grad_clip.h"
#include "trainer/loss_scaler.h"
#include "trainer/lr_schedule.h"
#include "trainer/optimizer.h"
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

// ---- Gradient clipping ---------------------------------------------------------------

double float64_norm(const std::vector<at::Tensor>& grads) {
  double sum = 0;
  for (const auto& g : grads) {
    const at::Tensor d = g.to(at::kDouble).contiguous();
    for (int64_t i = 0; i < d.numel(); ++i) sum += d.data_ptr<double>()[i] * d.data_ptr<double>()[i];
  }
  return std::sqrt(sum);
}

std::vector<at::Tensor> random_grads(double scale) {
  at::manual_seed(17);
  return {at::randn({30, 7}) * scale, at::randn({7}) * scale, at::randn({3, 3, 3}) * scale};
}

TEST(TrainerGradClip, NormMatchesFloat64AndClipsToMaxNorm) {
  auto grads = random_grads(1.0);
  const double expected = float64_norm(grads);
  std::vector<at::Tensor> before;
  for (const auto& g : grads) before.push_back(g.clone());
  const double norm = clip_grad_norm(grads, 1.0);
  EXPECT_NEAR(norm, expected, 1e-6 * expected);
  ASSERT_GT(norm, 1.0);
  const double coef = 1.0 / (norm + 1e-6);
  for (size_t i = 0; i < grads.size(); ++i)
    EXPECT_LE(testing::max_rel_diff(grads[i], before[i] * coef, 1e-6), 1e-6) << i;
  EXPECT_NEAR(float64_norm(grads), 1.0, 1e-5);

  // Below the threshold (or with clipping off) the grads stay bit for bit.
  for (double max_norm : {2.0 * expected, 0.0}) {
    auto small = random_grads(1.0);
    EXPECT_NEAR(clip_grad_norm(small, max_norm), expected, 1e-6 * expected);
    for (size_t i = 0; i < small.size(); ++i) EXPECT_TRUE(testing::bitwise_equal(small[i], before[i])) << i;
  }
  EXPECT_EQ(global_grad_norm({}), 0.0);
}

TEST(TrainerGradClip, NonFiniteNormsPropagateAndFp16AccumulatesInFp32) {
  for (double bad : {std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN()}) {
    auto grads = random_grads(1.0);
    grads[1][3] = bad;
    const at::Tensor first = grads[0].clone();
    const double norm = clip_grad_norm(grads, 1.0);
    EXPECT_TRUE(std::isnan(bad) ? std::isnan(norm) : std::isinf(norm)) << norm;
    EXPECT_TRUE(testing::bitwise_equal(grads[0], first));  // not scaled by a bogus factor
  }
  // 1000 fp16 values of 300: the sum of squares (9e7) overflows fp16 (max 65504), not fp32.
  const std::vector<at::Tensor> half = {at::full({1000}, 300.0, at::kHalf)};
  EXPECT_NEAR(global_grad_norm(half), 300.0 * std::sqrt(1000.0), 1e-3);
  // Gradients of named parameters: only the defined ones.
  at::Tensor a = at::ones({4}), b = at::ones({2});
  a.mutable_grad() = at::full({4}, 2.0);
  EXPECT_EQ(gradients_of({{"a", a}, {"b", b}}).size(), 1u);
}

// ---- Loss scaler ---------------------------------------------------------------------

PrecisionOptions fp16_options() {
  PrecisionOptions o;
  o.precision = Precision::kFp16;
  o.initial_scale = 65536.0;
  o.growth_interval = 3;
  o.max_consecutive_skips = 4;
  return o;
}

/// One training step as the pre-training loop does it: unscale + check, then either the
/// optimizer update or a skip. Returns whether the update was applied.
bool train_step(DynamicLossScaler& scaler, Optimizer& opt, const NamedTensors& params, int64_t step) {
  const bool finite = scaler.unscale_clip_and_check(gradients_of(params), 0.0).finite;
  if (!scaler.update(finite, step)) return false;
  opt.step(1e-3);
  return true;
}

TEST(TrainerLossScaler, InfGradientsSkipTheStepAndHalveTheScale) {
  DynamicLossScaler scaler(fp16_options());
  EXPECT_EQ(scaler.scale(), 65536.0);
  EXPECT_EQ(scaler.scale_loss(at::full({}, 0.5)).item<double>(), 32768.0);

  at::Tensor w = at::ones({3});
  w.set_requires_grad(true);
  OptimizerOptions oo;
  AdamW opt({{"w", w}}, oo);

  // Finite scaled grads are divided by the scale and applied.
  w.mutable_grad() = at::full({3}, 65536.0 * 0.25);
  EXPECT_TRUE(train_step(scaler, opt, {{"w", w}}, 1));
  EXPECT_TRUE(at::equal(w.grad(), at::full({3}, 0.25)));
  EXPECT_LT(w[0].item<double>(), 1.0);

  // Injected inf (and NaN): the step is skipped, the weights stay, the scale halves.
  for (float bad : {std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()}) {
    const at::Tensor before = w.detach().clone();
    const double scale_before = scaler.scale();
    w.mutable_grad() = at::full({3}, 1.0);
    w.mutable_grad()[1] = bad;
    EXPECT_FALSE(train_step(scaler, opt, {{"w", w}}, 2));
    EXPECT_TRUE(testing::bitwise_equal(w.detach(), before));
    EXPECT_EQ(scaler.scale(), scale_before * 0.5);
    EXPECT_EQ(scaler.state().growth_tracker, 0);
  }
  EXPECT_EQ(scaler.state().consecutive_skips, 2);
  EXPECT_EQ(scaler.state().total_skips, 2);

  // fp16 grads work too (the check runs over every grad, any float dtype).
  std::vector<at::Tensor> half = {at::full({4}, 2.0, at::kHalf), at::full({2}, 65504.0, at::kHalf)};
  DynamicLossScaler s2(fp16_options());
  EXPECT_TRUE(s2.unscale_clip_and_check(half, 0.0).finite);
  EXPECT_EQ(half[0][0].item<float>(), 2.0f / 65536.0f);
  half[1][0] = std::numeric_limits<float>::infinity();
  const auto bad = s2.unscale_clip_and_check(half, 0.0);
  EXPECT_FALSE(bad.finite);
  EXPECT_TRUE(std::isinf(bad.norm));
  EXPECT_EQ(half[0][0].item<float>(), 2.0f / 65536.0f);  // a skipped step leaves the grads alone
}

TEST(TrainerLossScaler, OneMultiplyEqualsUnscaleThenClipBitForBit) {
  // The reference is the two-pass procedure: g / S, then torch's clip rule on the result.
  DynamicLossScaler scaler(fp16_options());  // S = 65536
  const double S = scaler.scale();
  for (double max_norm : {1.0, 1e6, 0.0}) {  // clipping active; inactive; off
    auto fused = random_grads(S * 3.0);
    std::vector<at::Tensor> unscaled;
    for (const auto& g : fused) unscaled.push_back(g * static_cast<float>(1.0 / S));
    const double expected_norm = float64_norm(unscaled);
    const double reference_norm = clip_grad_norm(unscaled, max_norm);
    const auto checked = scaler.unscale_clip_and_check(fused, max_norm);
    EXPECT_TRUE(checked.finite);
    EXPECT_EQ(checked.norm, reference_norm) << max_norm;
    EXPECT_NEAR(checked.norm, expected_norm, 1e-6 * expected_norm);
    for (size_t i = 0; i < fused.size(); ++i) EXPECT_TRUE(testing::bitwise_equal(fused[i], unscaled[i])) << max_norm;
  }
  // S = 1 (bf16/fp32) below the threshold: nothing is written.
  PrecisionOptions o;
  o.precision = Precision::kBf16;
  DynamicLossScaler one(o);
  auto grads = random_grads(1.0);
  const at::Tensor before = grads[0].clone();
  EXPECT_NEAR(one.unscale_clip_and_check(grads, 1e6).norm, float64_norm(grads), 1e-6 * float64_norm(grads));
  EXPECT_TRUE(testing::bitwise_equal(grads[0], before));
}

TEST(TrainerLossScaler, GrowsAfterTheIntervalAndResetsOnOverflow) {
  DynamicLossScaler scaler(fp16_options());  // interval 3
  EXPECT_TRUE(scaler.update(true, 1));
  EXPECT_TRUE(scaler.update(true, 2));
  EXPECT_EQ(scaler.scale(), 65536.0);
  EXPECT_TRUE(scaler.update(true, 3));
  EXPECT_EQ(scaler.scale(), 131072.0);
  EXPECT_EQ(scaler.state().growth_tracker, 0);
  EXPECT_TRUE(scaler.update(true, 4));
  EXPECT_TRUE(scaler.update(true, 5));
  EXPECT_FALSE(scaler.update(false, 6));  // overflow resets the tracker
  EXPECT_EQ(scaler.scale(), 65536.0);
  EXPECT_TRUE(scaler.update(true, 7));
  EXPECT_TRUE(scaler.update(true, 8));
  EXPECT_EQ(scaler.scale(), 65536.0);
  EXPECT_TRUE(scaler.update(true, 9));
  EXPECT_EQ(scaler.scale(), 131072.0);
}

TEST(TrainerLossScaler, AbortsAfterMaxConsecutiveSkipsNamingStepAndCount) {
  DynamicLossScaler scaler(fp16_options());  // max 4 consecutive skips
  int64_t step = 0;
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(scaler.update(false, ++step));
  EXPECT_TRUE(scaler.update(true, ++step));  // a finite step resets the count
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(scaler.update(false, ++step));
  try {
    scaler.update(false, ++step);
    FAIL() << "no abort after 4 consecutive skips";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("step 8: 4 consecutive steps had inf/NaN gradients"), std::string::npos) << msg;
    EXPECT_NE(msg.find("max_consecutive_skips = 4"), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos);
  }
}

TEST(TrainerLossScaler, Bf16KeepsScaleOneButStillSkipsAndStateRoundTrips) {
  PrecisionOptions o = fp16_options();
  o.precision = Precision::kBf16;
  DynamicLossScaler bf16(o);
  EXPECT_FALSE(bf16.scaling_enabled());
  EXPECT_FALSE(bf16.update(false, 1));
  EXPECT_EQ(bf16.scale(), 1.0);
  std::vector<at::Tensor> g = {at::full({2}, 3.0)};
  EXPECT_TRUE(bf16.unscale_clip_and_check(g, 0.0).finite);
  EXPECT_EQ(g[0][0].item<float>(), 3.0f);

  DynamicLossScaler a(fp16_options()), b(fp16_options());
  a.update(false, 1);
  a.update(true, 2);
  b.load_state(a.state());
  EXPECT_EQ(b.scale(), 32768.0);
  EXPECT_EQ(b.state().growth_tracker, 1);
  EXPECT_EQ(b.state().total_skips, 1);
  LossScalerState bad = a.state();
  bad.scale = 0;
  EXPECT_THROW(b.load_state(bad), Error);
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
  EXPECT_EQ(CheckpointOptions::fields().to_kv(CheckpointOptions{}).at("keep_every"), "100000");

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
  CheckpointOptions bad_keep;
  bad_keep.keep_last = -1;
  EXPECT_EQ(message(bad_keep).rfind("checkpoint.keep_last:", 0), 0u);
}

}  // namespace
}  // namespace tupe::trainer
