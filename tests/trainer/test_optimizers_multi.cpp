// The multi-tensor optimizers (trainer/optimizer.cpp) against the per-tensor implementation
// they replaced (its update math copied below, run in float64), the on-device step
// cancellation (found_inf), skipped parameters, checkpoints in the old format, and the
// number of ATen ops a step dispatches (tests/support/op_counter.h).
#include <ATen/ATen.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <tuple>

#include "common/error.h"
#include "tests/support/op_counter.h"
#include "tests/trainer/optimizer_test_util.h"
#include "tests/trainer/test_util.h"
#include "trainer/lr_schedule.h"
#include "trainer/optimizer.h"

namespace tupe::trainer {
namespace {

using testing::bitwise_equal;
using testing::kShapes;
using testing::kSteps;
using testing::make_grads;
using testing::make_params;
using testing::set_grads;
using testing::test_options;

/// The optimizer state of one parameter as the per-tensor implementation kept it.
struct RefSlot {
  at::Tensor param, exp_avg, exp_avg_sq;
  int64_t step = 0;
  bool decay = true;
};

/// AdamW::update of the per-tensor implementation (commit 0a2a4a0), op for op.
void reference_adamw(RefSlot& s, const at::Tensor& grad, double lr, const OptimizerOptions& o) {
  const double beta1 = o.beta1, beta2 = o.beta2;
  if (s.decay && o.weight_decay != 0) s.param.mul_(1 - lr * o.weight_decay);
  s.exp_avg.lerp_(grad, 1 - beta1);
  s.exp_avg_sq.mul_(beta2).addcmul_(grad, grad, 1 - beta2);
  const double t = static_cast<double>(s.step);
  const double bias_correction1 = 1 - std::pow(beta1, t);
  const double bias_correction2 = 1 - std::pow(beta2, t);
  const double step_size = lr / bias_correction1;
  const double bias_correction2_sqrt = std::pow(bias_correction2, 0.5);
  const at::Tensor denom = (s.exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(o.eps);
  s.param.addcdiv_(s.exp_avg, denom, -step_size);
}

/// Lamb::update of the per-tensor implementation (commit 0a2a4a0), op for op.
void reference_lamb(RefSlot& s, const at::Tensor& grad, double lr, const OptimizerOptions& o) {
  const double beta1 = o.beta1, beta2 = o.beta2;
  s.exp_avg.mul_(beta1).add_(grad, 1 - beta1);
  s.exp_avg_sq.mul_(beta2).addcmul_(grad, grad, 1 - beta2);
  const double t = static_cast<double>(s.step);
  const double bias_correction1 = 1 - std::pow(beta1, t);
  const double bias_correction2 = 1 - std::pow(beta2, t);
  at::Tensor u = (s.exp_avg / bias_correction1).div_((s.exp_avg_sq / bias_correction2).sqrt_().add_(o.eps));
  if (s.decay && o.weight_decay != 0) u.add_(s.param, o.weight_decay);
  const at::Tensor p_norm = at::linalg_vector_norm(s.param, 2);
  const at::Tensor u_norm = at::linalg_vector_norm(u, 2);
  const at::Tensor ratio = at::where(p_norm.gt(0).logical_and(u_norm.gt(0)), p_norm / u_norm, at::ones_like(p_norm));
  s.param.sub_(u.mul_(ratio * lr));
}

/// The per-tensor optimizer in float64 over copies of `params` (Optimizer::step's loop).
struct Reference {
  OptimizerKind kind;
  OptimizerOptions options;
  std::vector<RefSlot> slots;
  Reference(const checkpoint::NamedTensors& params, const OptimizerOptions& o, const Optimizer& opt)
      : kind(o.optimizer), options(o) {
    for (const auto& [name, p] : params) {
      const at::Tensor d = p.detach().to(at::kDouble).clone();
      slots.push_back({d, at::zeros_like(d), at::zeros_like(d), 0, opt.decays(name)});
    }
  }
  void step(const std::vector<at::Tensor>& grads, double lr) {
    for (size_t i = 0; i < slots.size(); ++i) {
      if (!grads[i].defined()) continue;
      ++slots[i].step;
      const at::Tensor g = grads[i].scalar_type() == at::kDouble ? grads[i] : grads[i].to(at::kDouble);
      kind == OptimizerKind::kLamb ? reference_lamb(slots[i], g, lr, options)
                                   : reference_adamw(slots[i], g, lr, options);
    }
  }
};

/// 50 parameters of `dtype` shaped like a few TUPE-BERT layers (weights, biases that start
/// at 0, norms), and gradients for `steps` steps with some missing.
checkpoint::NamedTensors many_params(at::ScalarType dtype, uint64_t seed) {
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  checkpoint::NamedTensors out;
  for (int layer = 0; out.size() < 50; ++layer) {
    const std::string prefix = "encoder.layers." + std::to_string(layer) + ".";
    for (const auto& [name, shape, zero] :
         std::vector<std::tuple<std::string, std::vector<int64_t>, bool>>{{"attention.query.weight", {12, 8}, false},
                                                                          {"attention.query.bias", {12}, true},
                                                                          {"attention_norm.weight", {8}, false},
                                                                          {"ffn.weight", {16, 8}, false},
                                                                          {"ffn.bias", {16}, true}}) {
      if (out.size() == 50) break;
      at::Tensor p = zero ? at::zeros(shape, dtype) : (at::randn(shape, gen, at::kFloat) * 0.05).to(dtype);
      p.set_requires_grad(true);
      out.emplace_back(prefix + name, p);
    }
  }
  return out;
}

std::vector<std::vector<at::Tensor>> many_grads(const checkpoint::NamedTensors& params, int steps, uint64_t seed) {
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  std::vector<std::vector<at::Tensor>> out(steps);
  for (int k = 0; k < steps; ++k)
    for (size_t i = 0; i < params.size(); ++i) {
      at::Tensor g = at::randn(params[i].second.sizes(), gen, at::kFloat) * (0.01 * (k + 1));
      out[k].push_back((i + k) % 7 == 0 ? at::Tensor() : g);  // every step misses a few grads
    }
  return out;
}

const char* kind_name(OptimizerKind kind) { return kind == OptimizerKind::kLamb ? "LAMB" : "AdamW"; }

TEST(TrainerOptimizers, MatchesThePerTensorImplementationInFloat64) {
  for (OptimizerKind kind : {OptimizerKind::kAdamW, OptimizerKind::kLamb})
    for (at::ScalarType dtype : {at::kFloat, at::kDouble}) {
      const OptimizerOptions o = test_options(kind);
      const LrSchedule schedule(o);
      const checkpoint::NamedTensors params = many_params(dtype, 21);
      const auto grads = many_grads(params, kSteps, 22);
      auto opt = make_optimizer(params, o);
      Reference ref(params, o, *opt);
      // float32 against float64: a few float32 roundings per step, accumulated over the
      // steps (measured ~1e-7); float64 against float64: the order of the ops differs.
      const double tolerance = dtype == at::kFloat ? 1e-6 : 1e-12;
      double worst = 0;
      for (int k = 0; k < kSteps; ++k) {
        set_grads(params, grads[k]);
        opt->step(schedule.lr(k + 1));
        ref.step(grads[k], schedule.lr(k + 1));
        for (size_t i = 0; i < params.size(); ++i) {
          const double d = testing::max_rel_diff(params[i].second.detach(), ref.slots[i].param, 1e-2);
          worst = std::max(worst, d);
          EXPECT_LE(d, tolerance) << kind_name(kind) << " " << params[i].first << " step " << k + 1;
        }
      }
      // m sums gradients of either sign (float32 error ~ one ulp of the gradients, ~0.01
      // here, not of m): relative to |m| + 0.01. v sums squares (no cancellation).
      const checkpoint::OptimizerState state = opt->state_dict();
      for (size_t i = 0; i < params.size(); ++i) {
        const std::string& name = params[i].first;
        EXPECT_LE(testing::max_rel_diff(checkpoint::find_tensor(state.tensors, name + "/exp_avg"), ref.slots[i].exp_avg, 1e-2),
                  tolerance)
            << name;
        EXPECT_LE(testing::max_rel_diff(checkpoint::find_tensor(state.tensors, name + "/exp_avg_sq"), ref.slots[i].exp_avg_sq,
                                        1e-8),
                  tolerance)
            << name;
        EXPECT_EQ(checkpoint::find_tensor(state.tensors, name + "/step").item<int64_t>(), ref.slots[i].step) << name;
      }
      std::printf("[ measured ] %s (%s, %zu params) vs the per-tensor implementation in float64: max relative "
                  "difference %.3g\n",
                  kind_name(kind), c10::toString(dtype), params.size(), worst);
    }
}

/// Bitwise copies of every parameter and state tensor, for before/after comparisons.
checkpoint::NamedTensors snapshot(const checkpoint::NamedTensors& params, const Optimizer& opt) {
  checkpoint::NamedTensors out;
  for (const auto& [name, p] : params) out.emplace_back("param/" + name, p.detach().clone());
  for (const auto& [name, t] : opt.state_dict().tensors) out.emplace_back(name, t.clone());
  return out;
}

void expect_bitwise_equal(const checkpoint::NamedTensors& a, const checkpoint::NamedTensors& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].first, b[i].first) << what;
    EXPECT_TRUE(bitwise_equal(a[i].second, b[i].second)) << what << ": " << a[i].first;
  }
}

TEST(TrainerOptimizers, FoundInfOneChangesNothingAndZeroIsAPlainStep) {
  const auto grads = make_grads(31);
  for (OptimizerKind kind : {OptimizerKind::kAdamW, OptimizerKind::kLamb}) {
    const OptimizerOptions o = test_options(kind);
    const checkpoint::NamedTensors a_params = make_params(at::kFloat, 32);
    const checkpoint::NamedTensors b_params = testing::clone_params(a_params, at::kFloat);
    auto a = make_optimizer(a_params, o), b = make_optimizer(b_params, o);
    for (int k = 0; k < 2; ++k) {
      set_grads(a_params, grads[k]);
      set_grads(b_params, grads[k]);
      a->step(1e-2);
      b->step(1e-2);
    }
    // A step with inf and NaN grads, cancelled: a [] and a [1] found_inf.
    const checkpoint::NamedTensors before = snapshot(a_params, *a);
    std::vector<at::Tensor> bad = grads[2];
    bad[0] = bad[0].clone();
    bad[0].view(-1)[0] = std::numeric_limits<float>::infinity();
    bad[1] = bad[1].clone();
    bad[1].view(-1)[1] = std::numeric_limits<float>::quiet_NaN();
    set_grads(a_params, bad);
    a->step(1e-2, at::ones({}, at::kFloat));
    expect_bitwise_equal(snapshot(a_params, *a), before, std::string(kind_name(kind)) + " found_inf [] = 1");
    a->step(5e-3, at::ones({1}, at::kFloat));
    expect_bitwise_equal(snapshot(a_params, *a), before, std::string(kind_name(kind)) + " found_inf [1] = 1");
    const checkpoint::OptimizerState skipped = a->state_dict();
    for (const auto& [name, p] : a_params) EXPECT_EQ(checkpoint::find_tensor(skipped.tensors, name + "/step").item<int64_t>(), 2);
    // found_inf = 0 is step(lr), bit for bit; b never saw the cancelled steps.
    for (int k = 2; k < kSteps; ++k) {
      set_grads(a_params, grads[k]);
      set_grads(b_params, grads[k]);
      a->step(1e-2, at::zeros({}, at::kFloat));
      b->step(1e-2);
      expect_bitwise_equal(snapshot(a_params, *a), snapshot(b_params, *b),
                           std::string(kind_name(kind)) + " found_inf = 0, step " + std::to_string(k + 1));
    }
  }
}

TEST(TrainerOptimizers, RejectsABadFoundInf) {
  const checkpoint::NamedTensors params = make_params(at::kFloat, 3);
  for (OptimizerKind kind : {OptimizerKind::kAdamW, OptimizerKind::kLamb}) {
    auto opt = make_optimizer(params, test_options(kind));
    set_grads(params, make_grads(4)[0]);
    const checkpoint::NamedTensors before = snapshot(params, *opt);
    for (const at::Tensor& bad : {at::zeros({}, at::kDouble), at::zeros({2}, at::kFloat), at::zeros({1, 1}, at::kFloat),
                                  at::zeros({}, at::TensorOptions().dtype(at::kFloat).device(at::kMeta))}) {
      try {
        opt->step(1e-2, bad);
        ADD_FAILURE() << kind_name(kind) << ": found_inf " << bad.toString() << bad.sizes() << " accepted";
      } catch (const Error& e) {
        const std::string msg = e.what();
        EXPECT_NE(msg.find("optimizer: found_inf"), std::string::npos) << msg;
        EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
      }
    }
    expect_bitwise_equal(snapshot(params, *opt), before, "after rejected found_inf");
  }
}

TEST(TrainerOptimizers, AParameterWithoutGradIsSkipped) {
  const auto grads = make_grads(41);
  for (OptimizerKind kind : {OptimizerKind::kAdamW, OptimizerKind::kLamb}) {
    const checkpoint::NamedTensors params = make_params(at::kFloat, 42);
    auto opt = make_optimizer(params, test_options(kind));
    set_grads(params, grads[0]);
    opt->step(1e-2);
    const checkpoint::NamedTensors before = snapshot(params, *opt);
    std::vector<at::Tensor> partial = grads[1];
    partial[1] = at::Tensor();  // the query bias gets no grad in step 2
    set_grads(params, partial);
    opt->step(1e-2);
    const checkpoint::NamedTensors after = snapshot(params, *opt);
    const std::string skipped = kShapes[1].first;
    for (size_t i = 0; i < after.size(); ++i) {
      const std::string& name = after[i].first;
      const bool of_skipped = name == "param/" + skipped || name.rfind(skipped + "/", 0) == 0;
      EXPECT_EQ(bitwise_equal(after[i].second, before[i].second), of_skipped) << kind_name(kind) << " " << name;
    }
    const checkpoint::OptimizerState state = opt->state_dict();
    for (const auto& [name, p] : params)
      EXPECT_EQ(checkpoint::find_tensor(state.tensors, name + "/step").item<int64_t>(), name == skipped ? 1 : 2) << name;
  }
}

/// The state the per-tensor implementation's state_dict() wrote: moments as they are,
/// "<param>/step" int64 [] on the CPU, and its metadata.
checkpoint::OptimizerState old_format_state(const std::vector<std::string>& names, const Reference& ref) {
  checkpoint::OptimizerState out;
  for (size_t i = 0; i < names.size(); ++i) {
    out.tensors.emplace_back(names[i] + "/exp_avg", ref.slots[i].exp_avg);
    out.tensors.emplace_back(names[i] + "/exp_avg_sq", ref.slots[i].exp_avg_sq);
    out.tensors.emplace_back(names[i] + "/step", at::scalar_tensor(ref.slots[i].step, at::kLong));
  }
  const OptimizerOptions& o = ref.options;
  out.metadata = {{"optimizer", ref.kind == OptimizerKind::kLamb ? "lamb" : "adamw"},
                  {"format_version", "1"},
                  {"beta1", format_double(o.beta1)},
                  {"beta2", format_double(o.beta2)},
                  {"eps", format_double(o.eps)},
                  {"weight_decay", format_double(o.weight_decay)}};
  return out;
}

TEST(TrainerOptimizers, LoadsAStateInTheOldFormatAndContinuesIt) {
  testing::TempDir dir;
  const auto grads = make_grads(51);
  for (OptimizerKind kind : {OptimizerKind::kAdamW, OptimizerKind::kLamb}) {
    const OptimizerOptions o = test_options(kind);
    const checkpoint::NamedTensors params = make_params(at::kDouble, 52);
    std::vector<std::string> names;
    for (const auto& [name, p] : params) names.push_back(name);
    auto opt = make_optimizer(params, o);
    Reference ref(params, o, *opt);
    for (int k = 0; k < 3; ++k) ref.step(grads[k], 1e-2);  // step 2 leaves the word embedding at t = 2

    // Through a file, as a checkpoint does; then the parameters as the reference has them.
    const checkpoint::OptimizerState old = old_format_state(names, ref);
    checkpoint::write_safetensors(dir / "old.safetensors", old.tensors, old.metadata);
    const checkpoint::SafetensorsContents file = checkpoint::read_safetensors(dir / "old.safetensors");
    opt->load_state_dict({file.tensors, file.metadata});
    for (size_t i = 0; i < params.size(); ++i) params[i].second.detach().copy_(ref.slots[i].param);

    // state_dict() writes the same names, dtypes, shapes, devices, values and metadata.
    const checkpoint::OptimizerState now = opt->state_dict();
    EXPECT_EQ(now.metadata, old.metadata);
    ASSERT_EQ(now.tensors.size(), old.tensors.size());
    for (size_t i = 0; i < now.tensors.size(); ++i) {
      EXPECT_EQ(now.tensors[i].first, old.tensors[i].first);
      EXPECT_EQ(now.tensors[i].second.device(), at::Device(at::kCPU)) << now.tensors[i].first;
      EXPECT_TRUE(bitwise_equal(now.tensors[i].second, old.tensors[i].second)) << now.tensors[i].first;
    }
    for (int k = 3; k < kSteps; ++k) {
      set_grads(params, grads[k]);
      opt->step(1e-2);
      ref.step(grads[k], 1e-2);
    }
    for (size_t i = 0; i < params.size(); ++i)
      EXPECT_LE(testing::max_rel_diff(params[i].second.detach(), ref.slots[i].param, 1e-2), 1e-12)
          << kind_name(kind) << " " << names[i];
    EXPECT_EQ(checkpoint::find_tensor(opt->state_dict().tensors, names[3] + "/step").item<int64_t>(), kSteps - 1);

    // t must stay exact in float32: a step count beyond 2^24 is refused, naming it.
    checkpoint::OptimizerState huge = old;
    for (auto& [name, t] : huge.tensors)
      if (name == names[0] + "/step") t = at::scalar_tensor(int64_t{1} << 25, at::kLong);
    try {
      opt->load_state_dict(huge);
      ADD_FAILURE() << "a step count of 2^25 loaded";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(names[0] + "/step"), std::string::npos) << e.what();
    }
  }
}

TEST(TrainerOptimizers, ZeroGradZerosInPlaceKeepingBucketViews) {
  for (OptimizerKind kind : {OptimizerKind::kAdamW, OptimizerKind::kLamb}) {
    const checkpoint::NamedTensors params = make_params(at::kFloat, 81);
    int64_t total = 0;
    for (const auto& [name, p] : params) total += p.numel();
    // Grads as views into one bucket (as DDP's gradient_as_bucket_view), one of another
    // dtype (step() would refuse it; zero_grad() still zeroes it), one undefined.
    const at::Tensor bucket = at::randn({total});
    int64_t offset = 0;
    for (size_t i = 0; i < params.size(); ++i) {
      at::Tensor p = params[i].second;
      if (i < 2) p.mutable_grad() = bucket.narrow(0, offset, p.numel()).view(p.sizes());
      offset += p.numel();
    }
    params[2].second.mutable_grad() = at::ones_like(params[2].second, at::kDouble);
    auto opt = make_optimizer(params, test_options(kind));
    opt->zero_grad();
    const int64_t covered = params[0].second.numel() + params[1].second.numel();
    EXPECT_TRUE(at::equal(bucket.narrow(0, 0, covered), at::zeros({covered}))) << kind_name(kind);
    EXPECT_NE(bucket.narrow(0, covered, total - covered).abs().sum().item<float>(), 0.0f);  // not a grad
    EXPECT_EQ(params[0].second.grad().data_ptr(), bucket.data_ptr());
    EXPECT_TRUE(at::equal(params[2].second.grad(), at::zeros_like(params[2].second, at::kDouble)));
    EXPECT_FALSE(params[3].second.grad().defined());
  }
}

TEST(TrainerOptimizers, OpCounterCountsTopLevelOpsOnly) {
  std::vector<at::Tensor> tensors;
  for (int i = 0; i < 50; ++i) tensors.push_back(at::zeros({3}));
  {
    ::tupe::testing::OpCounter counter;
    for (at::Tensor& t : tensors) t.add_(1);
    EXPECT_EQ(counter.total(), 50);
    EXPECT_EQ(counter.counts().at("aten::add_"), 50);
    counter.reset();
    at::_foreach_add_(tensors, 1);  // on the CPU: a loop of add_ inside, nested
    EXPECT_EQ(counter.total(), 1) << counter.summary();
    EXPECT_EQ(counter.counts().count("aten::_foreach_add_"), 1u) << counter.summary();
    EXPECT_THROW(::tupe::testing::OpCounter second, std::logic_error);
    counter.stop();
    tensors[0].add_(1);
    EXPECT_EQ(counter.total(), 1);
  }
  EXPECT_EQ(tensors[0][0].item<float>(), 3.0f);
}

TEST(TrainerOptimizers, AStepDispatchesAtMostTenOpsPerGroup) {
  const checkpoint::NamedTensors params = many_params(at::kFloat, 61);
  std::vector<at::Tensor> grads;
  for (const auto& [name, p] : params) grads.push_back(at::randn_like(p) * 0.01);
  for (OptimizerKind kind : {OptimizerKind::kAdamW, OptimizerKind::kLamb}) {
    auto opt = make_optimizer(params, test_options(kind));
    for (int k = 0; k < 3; ++k) {
      set_grads(params, grads);
      const bool with_found_inf = k == 2;
      const at::Tensor found_inf = at::zeros({}, at::kFloat);
      ::tupe::testing::OpCounter counter;
      with_found_inf ? opt->step(1e-3, found_inf) : opt->step(1e-3);
      counter.stop();
      std::printf("[ measured ] %s step %d (%zu float32 params%s): %lld ATen ops: %s\n", kind_name(kind), k + 1,
                  params.size(), with_found_inf ? ", found_inf" : "", static_cast<long long>(counter.total()),
                  counter.summary().c_str());
      EXPECT_LE(counter.total(), 10) << kind_name(kind) << " step " << k + 1 << ": " << counter.summary();
    }
    // For comparison: the per-tensor implementation's step on the same parameters.
    Reference ref(params, test_options(kind), *opt);
    std::vector<at::Tensor> grads64;
    for (const at::Tensor& g : grads) grads64.push_back(g.to(at::kDouble));
    ::tupe::testing::OpCounter counter;
    ref.step(grads64, 1e-3);
    counter.stop();
    std::printf("[ measured ] %s per-tensor implementation, same step: %lld ATen ops\n", kind_name(kind),
                static_cast<long long>(counter.total()));
  }
}

}  // namespace
}  // namespace tupe::trainer
