// AdamW against torch.optim.AdamW (fused and single-tensor, run by $TUPE_PYTHON on the same
// inputs), LAMB against a float64 re-implementation of NVIDIA's formula, the no-decay rule,
// and strict state dicts. (test_optimizers_multi.cpp: the multi-tensor specifics.)
#include <ATen/CPUGeneratorImpl.h>

#include <cmath>

#include "common/error.h"
#include "tests/trainer/optimizer_test_util.h"
#include "tests/trainer/test_util.h"
#include "trainer/lr_schedule.h"
#include "trainer/optimizer.h"

namespace tupe::trainer {
namespace {

using testing::TempDir;

using testing::kShapes;
using testing::kSteps;
using testing::make_grads;
using testing::make_params;
using testing::set_grads;
using testing::test_options;

TEST(TrainerOptimizers, DefaultDecayRuleExemptsBiasesAndLayerNorms) {
  EXPECT_TRUE(default_weight_decay("encoder.layers.0.attention.query.weight"));
  EXPECT_TRUE(default_weight_decay("encoder.embeddings.word.weight"));
  EXPECT_TRUE(default_weight_decay("encoder.positional.relative_bias.weight"));  // a table, not a bias
  EXPECT_FALSE(default_weight_decay("encoder.layers.0.attention.query.bias"));
  EXPECT_FALSE(default_weight_decay("mlm_head.bias"));
  EXPECT_FALSE(default_weight_decay("encoder.layers.0.attention_norm.weight"));
  EXPECT_FALSE(default_weight_decay("encoder.embeddings.norm.weight"));
  EXPECT_FALSE(default_weight_decay("bert.encoder.layer.0.output.LayerNorm.weight"));
  EXPECT_FALSE(default_weight_decay("bias"));
}

TEST(TrainerOptimizers, AdamWMatchesTorchOptimAdamW) {
  TempDir dir;
  const OptimizerOptions o = test_options(OptimizerKind::kAdamW);
  const checkpoint::NamedTensors params = make_params(at::kFloat, 1234);
  const auto grads = make_grads(99);
  const LrSchedule schedule(o);

  // Inputs for the reference run.
  checkpoint::NamedTensors inputs;
  std::string names, decay;
  AdamW opt(params, o);
  for (const auto& [name, p] : params) {
    inputs.emplace_back("param/" + name, p.detach().clone());
    names += (names.empty() ? "" : ",") + name;
    decay += std::string(decay.empty() ? "" : ",") + (opt.decays(name) ? "1" : "0");
  }
  EXPECT_EQ(decay, "1,0,0,1");
  at::Tensor lrs = at::empty({kSteps}, at::kDouble);
  for (int k = 0; k < kSteps; ++k) {
    lrs.data_ptr<double>()[k] = schedule.lr(k + 1);
    for (size_t i = 0; i < params.size(); ++i)
      if (grads[k][i].defined()) inputs.emplace_back("grad/" + std::to_string(k) + "/" + params[i].first, grads[k][i]);
  }
  inputs.emplace_back("lr", lrs);
  checkpoint::write_safetensors(dir / "in.safetensors", inputs,
                    {{"names", names}, {"decay", decay}, {"beta1", format_double(o.beta1)},
                     {"beta2", format_double(o.beta2)}, {"eps", format_double(o.eps)},
                     {"weight_decay", format_double(o.weight_decay)}, {"steps", std::to_string(kSteps)}});
  std::string log;
  ASSERT_EQ(testing::run_python("adamw_ref.py",
                                "'" + (dir / "in.safetensors").string() + "' '" + (dir / "out.safetensors").string() + "'",
                                &log),
            0)
      << log;
  const checkpoint::NamedTensors ref = checkpoint::read_safetensors(dir / "out.safetensors").tensors;

  // Against fused=True: the same ATen kernel (at::_fused_adamw_) on the same inputs in the
  // same order, so the results agree to the last bit except where the kernel's vector
  // body and scalar tail round differently (a fused multiply-add): allow 2 float32 ulps
  // (2.4e-7 relative). Against foreach=False (separate ops, other rounding): 1e-6.
  double worst_fused = 0, worst_single = 0;
  for (int k = 0; k < kSteps; ++k) {
    set_grads(params, grads[k]);
    opt.step(lrs[k].item<double>());
    for (const auto& [name, p] : params) {
      const std::string key = "/param/" + std::to_string(k) + "/" + name;
      const at::Tensor fused = checkpoint::find_tensor(ref, "fused" + key), single = checkpoint::find_tensor(ref, "single" + key);
      ASSERT_TRUE(fused.defined() && single.defined()) << key;
      const double df = testing::max_rel_diff(p.detach(), fused, 1e-30);
      const double ds = testing::max_rel_diff(p.detach(), single, 1e-2);
      worst_fused = std::max(worst_fused, df);
      worst_single = std::max(worst_single, ds);
      EXPECT_LE(df, 2.4e-7) << name << " after step " << k + 1 << " vs fused";
      EXPECT_LE(ds, 1e-6) << name << " after step " << k + 1 << " vs single-tensor";
    }
  }
  const checkpoint::OptimizerState state = opt.state_dict();
  for (const auto& [name, p] : params) {
    EXPECT_LE(testing::max_rel_diff(checkpoint::find_tensor(state.tensors, name + "/exp_avg"),
                                    checkpoint::find_tensor(ref, "fused/exp_avg/" + name), 1e-6),
              2.4e-7)
        << name;
    EXPECT_LE(testing::max_rel_diff(checkpoint::find_tensor(state.tensors, name + "/exp_avg_sq"),
                                    checkpoint::find_tensor(ref, "fused/exp_avg_sq/" + name), 1e-9),
              2.4e-7)
        << name;
    EXPECT_EQ(checkpoint::find_tensor(state.tensors, name + "/step").item<int64_t>(),
              checkpoint::find_tensor(ref, "fused/step/" + name).item<int64_t>())
        << name;
  }
  EXPECT_EQ(checkpoint::find_tensor(state.tensors, kShapes[3].first + "/step").item<int64_t>(), kSteps - 1);
  std::printf("[ measured ] AdamW vs torch.optim.AdamW over %d steps: max relative difference %.3g (fused=True), "
              "%.3g (foreach=False)\n",
              kSteps, worst_fused, worst_single);
}

/// LAMB in float64, element by element, from the formula (NVIDIA's BERT recipe).
struct ReferenceLamb {
  std::vector<double> p, m, v;
  int64_t t = 0;
  void step(const std::vector<double>& g, double lr, const OptimizerOptions& o, bool decay) {
    ++t;
    const double bc1 = 1 - std::pow(o.beta1, static_cast<double>(t));
    const double bc2 = 1 - std::pow(o.beta2, static_cast<double>(t));
    std::vector<double> u(p.size());
    double p_sq = 0, u_sq = 0;
    for (size_t i = 0; i < p.size(); ++i) {
      m[i] = o.beta1 * m[i] + (1 - o.beta1) * g[i];
      v[i] = o.beta2 * v[i] + (1 - o.beta2) * g[i] * g[i];
      u[i] = (m[i] / bc1) / (std::sqrt(v[i] / bc2) + o.eps) + (decay ? o.weight_decay * p[i] : 0.0);
      p_sq += p[i] * p[i];
      u_sq += u[i] * u[i];
    }
    const double ratio = (p_sq > 0 && u_sq > 0) ? std::sqrt(p_sq) / std::sqrt(u_sq) : 1.0;
    for (size_t i = 0; i < p.size(); ++i) p[i] -= lr * ratio * u[i];
  }
};

std::vector<double> to_vector(const at::Tensor& t) {
  const at::Tensor d = t.detach().to(at::kDouble).contiguous();
  return std::vector<double>(d.data_ptr<double>(), d.data_ptr<double>() + d.numel());
}

TEST(TrainerOptimizers, LambMatchesFloat64Formula) {
  const OptimizerOptions o = test_options(OptimizerKind::kLamb);
  const LrSchedule schedule(o);
  const auto grads = make_grads(7);
  for (at::ScalarType dtype : {at::kDouble, at::kFloat}) {
    const checkpoint::NamedTensors params = make_params(dtype, 4321);
    Lamb opt(params, o);
    std::vector<ReferenceLamb> ref(params.size());
    for (size_t i = 0; i < params.size(); ++i) {
      ref[i].p = to_vector(params[i].second);
      ref[i].m.assign(ref[i].p.size(), 0.0);
      ref[i].v.assign(ref[i].p.size(), 0.0);
    }
    const double tolerance = dtype == at::kDouble ? 1e-12 : 2e-6;
    double worst = 0;
    for (int k = 0; k < kSteps; ++k) {
      set_grads(params, grads[k]);
      opt.step(schedule.lr(k + 1));
      for (size_t i = 0; i < params.size(); ++i) {
        if (grads[k][i].defined()) ref[i].step(to_vector(grads[k][i]), schedule.lr(k + 1), o, opt.decays(params[i].first));
        const at::Tensor want = at::tensor(ref[i].p, at::kDouble).reshape(params[i].second.sizes());
        const double d = testing::max_rel_diff(params[i].second.detach(), want, 1e-3);
        worst = std::max(worst, d);
        EXPECT_LE(d, tolerance) << params[i].first << " step " << k + 1 << " dtype " << c10::toString(dtype);
      }
    }
    std::printf("[ measured ] LAMB (%s) vs float64 formula: max relative difference %.3g\n", c10::toString(dtype), worst);
  }
}

TEST(TrainerOptimizers, LambTrustRatioIsOneWhenANormIsZero) {
  OptimizerOptions o = test_options(OptimizerKind::kLamb);
  // ||p|| = 0: first step is p = -lr * g / (|g| + eps) (m_hat = g, v_hat = g^2 at t = 1).
  at::Tensor zero_param = at::zeros({5}, at::kDouble);
  zero_param.set_requires_grad(true);
  const at::Tensor g = at::tensor({0.5, -2.0, 1e-3, 3.0, -0.25}, at::kDouble);
  zero_param.mutable_grad() = g.clone();
  // ||u|| = 0: zero grad on a no-decay parameter leaves it unchanged (no NaN).
  at::Tensor still = at::tensor({1.0, -2.0}, at::kDouble);
  still.set_requires_grad(true);
  still.mutable_grad() = at::zeros({2}, at::kDouble);
  Lamb opt({{"w.weight", zero_param}, {"ln.norm.bias", still}}, o);
  opt.step(0.01);
  for (int64_t i = 0; i < 5; ++i) {
    const double gi = g[i].item<double>();
    EXPECT_NEAR(zero_param[i].item<double>(), -0.01 * gi / (std::fabs(gi) + o.eps), 1e-15) << i;
  }
  EXPECT_EQ(still[0].item<double>(), 1.0);
  EXPECT_EQ(still[1].item<double>(), -2.0);
}

TEST(TrainerOptimizers, StateDictResumesBitwiseAndLoadsStrictly) {
  TempDir dir;
  const auto grads = make_grads(5);
  for (OptimizerKind kind : {OptimizerKind::kAdamW, OptimizerKind::kLamb}) {
    const OptimizerOptions o = test_options(kind);
    const checkpoint::NamedTensors a_params = make_params(at::kFloat, 11);
    auto a = make_optimizer(a_params, o);
    for (int k = 0; k < 3; ++k) {
      set_grads(a_params, grads[k]);
      a->step(1e-2 * (k + 1));
    }
    // Through a file, as a checkpoint does.
    const checkpoint::OptimizerState saved = a->state_dict();
    checkpoint::write_safetensors(dir / "opt.safetensors", saved.tensors, saved.metadata);
    const checkpoint::SafetensorsContents file = checkpoint::read_safetensors(dir / "opt.safetensors");
    const checkpoint::OptimizerState loaded{file.tensors, file.metadata};

    checkpoint::NamedTensors b_params;
    for (const auto& [name, p] : a_params) {
      at::Tensor copy = p.detach().clone();
      copy.set_requires_grad(true);
      b_params.emplace_back(name, copy);
    }
    auto b = make_optimizer(b_params, o);
    b->load_state_dict(loaded);
    for (int k = 3; k < kSteps; ++k) {
      set_grads(a_params, grads[k]);
      set_grads(b_params, grads[k]);
      a->step(1e-2);
      b->step(1e-2);
    }
    for (size_t i = 0; i < a_params.size(); ++i)
      EXPECT_TRUE(testing::bitwise_equal(a_params[i].second, b_params[i].second)) << a_params[i].first;
    const checkpoint::OptimizerState sa = a->state_dict(), sb = b->state_dict();
    ASSERT_EQ(sa.tensors.size(), sb.tensors.size());
    for (size_t i = 0; i < sa.tensors.size(); ++i)
      EXPECT_TRUE(testing::bitwise_equal(sa.tensors[i].second, sb.tensors[i].second)) << sa.tensors[i].first;

    // Strict loading: every problem named in one message; a failed load changes nothing.
    checkpoint::OptimizerState bad = loaded;
    const std::string p0 = kShapes[0].first, p1 = kShapes[1].first;
    bad.tensors.erase(std::remove_if(bad.tensors.begin(), bad.tensors.end(),
                                     [&](const auto& nt) { return nt.first == p0 + "/exp_avg_sq"; }),
                      bad.tensors.end());
    bad.tensors.emplace_back("extra.weight/exp_avg", at::zeros({2}));
    for (auto& [name, t] : bad.tensors)
      if (name == p1 + "/exp_avg") t = at::zeros({3});
    try {
      b->load_state_dict(bad);
      ADD_FAILURE() << "a mismatched state loaded";
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("missing: " + p0 + "/exp_avg_sq"), std::string::npos) << msg;
      EXPECT_NE(msg.find("unexpected: extra.weight/exp_avg"), std::string::npos) << msg;
      EXPECT_NE(msg.find("shape of " + p1 + "/exp_avg: saved [3] vs current [8]"), std::string::npos) << msg;
      EXPECT_EQ(msg.find('\n'), std::string::npos);
    }
    const checkpoint::OptimizerState after = b->state_dict();
    for (size_t i = 0; i < after.tensors.size(); ++i)
      EXPECT_TRUE(testing::bitwise_equal(after.tensors[i].second, sb.tensors[i].second)) << after.tensors[i].first;

    checkpoint::OptimizerState other_kind = loaded;
    other_kind.metadata["optimizer"] = kind == OptimizerKind::kAdamW ? "lamb" : "adamw";
    EXPECT_THROW(b->load_state_dict(other_kind), Error);
  }
}

TEST(TrainerOptimizers, RejectsGradOfWrongDtype) {
  const checkpoint::NamedTensors params = make_params(at::kFloat, 3);
  AdamW opt(params, test_options(OptimizerKind::kAdamW));
  at::Tensor p = params[0].second;
  p.mutable_grad() = at::zeros_like(p, at::kHalf);
  try {
    opt.step(1e-3);
    FAIL() << "fp16 grad accepted for an fp32 master parameter";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(params[0].first), std::string::npos) << e.what();
  }
  EXPECT_THROW(AdamW({{"x", at::zeros({2}, at::kHalf)}}, test_options(OptimizerKind::kAdamW)), Error);
  EXPECT_THROW(AdamW({{"x", at::zeros({2})}, {"x", at::zeros({2})}}, test_options(OptimizerKind::kAdamW)), Error);
}

}  // namespace
}  // namespace tupe::trainer
