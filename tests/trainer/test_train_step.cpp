// The one training step (trainer/train_step.h) under mpirun, on a small softmax regression
// whose gradient and first AdamW update are computed here independently in float64:
// - the synchronised gradient is that of the GLOBAL mean loss, whatever the world size and
//   whatever the split into micro-batches (ranks with different micro-batch counts, one rank
//   with a zero-weighted example), and the first update is AdamW's;
// - with unequal counts across ranks (and a rank without examples) the step's own
//   normalisation gives the float64 closed form of the global mean's loss and gradient;
// - state()/load_state() with the optimizer's state dict resume bitwise: the same dropout
//   draws (seeded per step and rank) and the same weights as the uninterrupted steps.
// Every rank computes its verdict; the verdicts are summed over ranks (tests/dist/mpi_test_env.h).
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "tests/dist/mpi_test_env.h"
#include "trainer/train_step.h"

namespace tupe::trainer {
namespace {

using dist::mpitest::make_mpi_comm;
using dist::mpitest::sum_over_ranks;

constexpr int64_t kExamples = 10, kFeatures = 4, kClasses = 3;

/// The same examples on every rank (seeded): features (N, F) float32 and labels (N).
std::pair<at::Tensor, at::Tensor> examples() {
  at::manual_seed(7);
  return {at::randn({kExamples, kFeatures}), at::randint(kClasses, {kExamples}, at::kLong)};
}

/// Fresh parameters W (C, F) and b (C), equal on every rank.
checkpoint::NamedTensors fresh_params() {
  at::manual_seed(11);
  return {{"linear.weight", at::randn({kClasses, kFeatures}).requires_grad_(true)},
          {"linear.bias", at::randn({kClasses}).requires_grad_(true)}};
}

checkpoint::NamedTensors detached_copy(const checkpoint::NamedTensors& params) {
  checkpoint::NamedTensors out;
  for (const auto& [n, t] : params) out.emplace_back(n, t.detach().clone().requires_grad_(true));
  return out;
}

TrainStepOptions options() {
  TrainStepOptions o;
  o.optimizer.lr = 0.1;
  o.optimizer.warmup_steps = 2;
  o.optimizer.total_steps = 10;
  o.optimizer.weight_decay = 0.01;
  o.optimizer.clip_grad_norm = 0;  // the buffer keeps the synchronised gradient as it is
  o.precision.precision = Precision::kFp32;
  o.dist.timeout_s = 0;
  o.dist.bucket_size_bytes = 16;  // several buckets for 15 parameters
  o.seed = 5;
  return o;
}

/// Summed CE of rows `rows` of the examples under parameters `params`.
at::Tensor ce_sum(const checkpoint::NamedTensors& params, const at::Tensor& x, const at::Tensor& y, const std::vector<int64_t>& rows) {
  const at::Tensor idx = at::tensor(rows, at::kLong);
  const at::Tensor logits = at::linear(x.index_select(0, idx), params[0].second, params[1].second);
  return at::cross_entropy_loss(logits, y.index_select(0, idx), {}, at::Reduction::Sum);
}

TEST(TrainerTrainStep, GradientOfTheGlobalMeanWhateverTheSplit) {
  auto comm = make_mpi_comm();
  const int rank = comm->rank(), world = comm->world_size();
  const auto [x, y] = examples();
  checkpoint::NamedTensors params = fresh_params();
  const checkpoint::NamedTensors initial = detached_copy(params);
  TrainStep step(params, *comm, c10::Device(c10::kCPU), options());

  // Rank r: examples r, r + W, ..., in micro-batches of 2 (so the ranks differ in count);
  // the last rank also back-propagates a zero-weighted copy of example 0, as an idle rank does.
  std::vector<int64_t> mine;
  for (int64_t i = rank; i < kExamples; i += world) mine.push_back(i);
  const bool extra = rank == world - 1;
  const int64_t micro = (static_cast<int64_t>(mine.size()) + 1) / 2 + (extra ? 1 : 0);
  const StepResult out = step.run(micro, [&](int64_t m) {
    if (extra && m == micro - 1) return MicroBatchLoss{ce_sum(params, x, y, {0}) * 0.0, 0};
    std::vector<int64_t> rows(mine.begin() + 2 * m, mine.begin() + std::min<int64_t>(2 * m + 2, static_cast<int64_t>(mine.size())));
    return MicroBatchLoss{ce_sum(params, x, y, rows), static_cast<int64_t>(rows.size())};
  });

  // Reference in float64: gradient of the mean CE over all examples, one AdamW step.
  checkpoint::NamedTensors ref;
  for (const auto& [n, t] : initial) ref.emplace_back(n, t.detach().to(at::kDouble).requires_grad_(true));
  std::vector<int64_t> all(kExamples);
  for (int64_t i = 0; i < kExamples; ++i) all[static_cast<size_t>(i)] = i;
  (ce_sum(ref, x.to(at::kDouble), y, all) / static_cast<double>(kExamples)).backward();
  const double lr = 0.1 * 1.0 / 2.0;  // warm-up: lr(1) = peak * 1 / W
  int64_t bad = 0;
  bad += std::abs(out.lr - lr) > 1e-15 ? 1 : 0;
  bad += out.found_inf.item<float>() != 0.0f ? 1 : 0;
  double max_grad_diff = 0, max_param_diff = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    const at::Tensor g = ref[i].second.grad();
    const at::Tensor got = params[i].second.grad().to(at::kDouble);
    max_grad_diff = std::max(max_grad_diff, (got - g).abs().max().item<double>());
    // AdamW's first step: m_hat = g, v_hat = g^2, p <- p (1 - lr wd) - lr g / (|g| + eps)
    // (biases get no decay).
    const double wd = params[i].first == "linear.bias" ? 0.0 : 0.01;
    const at::Tensor p0 = initial[i].second.detach().to(at::kDouble);
    const at::Tensor want = p0 * (1 - lr * wd) - lr * g / (g.abs() + 1e-6);
    max_param_diff = std::max(max_param_diff, (params[i].second.detach().to(at::kDouble) - want).abs().max().item<double>());
  }
  bad += max_grad_diff > 1e-6 ? 1 : 0;
  bad += max_param_diff > 1e-6 ? 1 : 0;
  EXPECT_LT(max_grad_diff, 1e-6) << "rank " << rank;
  EXPECT_LT(max_param_diff, 1e-6) << "rank " << rank;
  const TrainStepState st = step.state();
  bad += st.step == 1 && st.scheduler_step == 1 ? 0 : 1;
  EXPECT_EQ(sum_over_ranks(bad), 0);
}

/// Runs steps [first, last] of `step` on this rank's examples, with dropout-like draws in the
/// loss; returns the draws of each step (the first micro-batch's).
std::vector<at::Tensor> run_steps(TrainStep& step, const checkpoint::NamedTensors& params, int64_t first, int64_t last,
                                  int rank, int world) {
  const auto [x, y] = examples();
  std::vector<at::Tensor> draws;
  for (int64_t t = first; t <= last; ++t) {
    EXPECT_EQ(step.step() + 1, t);
    std::vector<int64_t> mine;
    for (int64_t i = rank; i < kExamples; i += world) mine.push_back(i);
    step.run(1, [&](int64_t) {
      const at::Tensor keep = at::rand({static_cast<int64_t>(mine.size()), kClasses}).gt(0.2);  // a dropout mask
      draws.push_back(keep.clone());
      const at::Tensor idx = at::tensor(mine, at::kLong);
      const at::Tensor logits = at::linear(x.index_select(0, idx), params[0].second, params[1].second) * keep / 0.8;
      return MicroBatchLoss{at::cross_entropy_loss(logits, y.index_select(0, idx), {}, at::Reduction::Sum),
                            static_cast<int64_t>(mine.size())};
    });
  }
  return draws;
}

TEST(TrainerTrainStep, StateAndLoadStateResumeBitwise) {
  auto comm = make_mpi_comm();
  const int rank = comm->rank(), world = comm->world_size();
  // Straight: steps 1..3.
  checkpoint::NamedTensors straight = fresh_params();
  TrainStep a(straight, *comm, c10::Device(c10::kCPU), options());
  const std::vector<at::Tensor> draws = run_steps(a, straight, 1, 3, rank, world);
  // Interrupted after step 2: the state and the optimizer's tensors go to a new step object.
  checkpoint::NamedTensors first = fresh_params();
  TrainStepState saved;
  checkpoint::OptimizerState optimizer_state;
  {
    TrainStep b(first, *comm, c10::Device(c10::kCPU), options());
    run_steps(b, first, 1, 2, rank, world);
    saved = b.state();
    optimizer_state = b.optimizer().state_dict();
    for (auto& [n, t] : optimizer_state.tensors) t = t.clone();
  }
  checkpoint::NamedTensors resumed = detached_copy(first);
  TrainStep c(resumed, *comm, c10::Device(c10::kCPU), options());
  c.load_state(saved);
  c.optimizer().load_state_dict(optimizer_state);
  const std::vector<at::Tensor> resumed_draws = run_steps(c, resumed, 3, 3, rank, world);

  int64_t bad = 0;
  bad += saved.step == 2 && saved.scheduler_step == 2 ? 0 : 1;
  bad += c.state().step == 3 && c.state().scheduler_step == 3 ? 0 : 1;
  bad += at::equal(resumed_draws.at(0), draws.at(2)) ? 0 : 1;
  // The draws are those of step_seed(seed, t, rank): a pure function of the step and rank.
  at::manual_seed(step_seed(5, 3, rank));
  bad += at::equal(at::rand({draws.at(2).size(0), kClasses}).gt(0.2), draws.at(2)) ? 0 : 1;
  bad += at::equal(draws.at(0), draws.at(1)) ? 1 : 0;  // steps draw differently
  for (size_t i = 0; i < straight.size(); ++i) bad += at::equal(straight[i].second, resumed[i].second) ? 0 : 1;
  EXPECT_EQ(bad, 0) << "rank " << rank;
  EXPECT_EQ(sum_over_ranks(bad), 0);
}

/// The closed form of the softmax regression's mean cross-entropy over `rows`, in float64:
/// L = (1/N) sum_i -log p_i[y_i], dL/dW = (1/N) sum_i (p_i - e_{y_i}) x_i^T, dL/db = (1/N) sum_i (p_i - e_{y_i}),
/// p_i = softmax(W x_i + b), written out with explicit loops (no autograd).
struct ClosedForm {
  double loss = 0;
  std::vector<double> dw, db;  ///< (C, F) row-major, (C)
};
ClosedForm mean_ce_closed_form(const checkpoint::NamedTensors& params, const at::Tensor& x, const at::Tensor& y,
                               const std::vector<int64_t>& rows) {
  const at::Tensor w = params[0].second.detach().to(at::kDouble).contiguous(),
                   b = params[1].second.detach().to(at::kDouble);
  const at::Tensor xd = x.to(at::kDouble).contiguous();
  ClosedForm f;
  f.dw.assign(kClasses * kFeatures, 0.0);
  f.db.assign(kClasses, 0.0);
  const double n = static_cast<double>(rows.size());
  for (int64_t i : rows) {
    double z[kClasses], zmax = -INFINITY, norm = 0;
    for (int64_t c = 0; c < kClasses; ++c) {
      z[c] = b[c].item<double>();
      for (int64_t k = 0; k < kFeatures; ++k) z[c] += w[c][k].item<double>() * xd[i][k].item<double>();
      zmax = std::max(zmax, z[c]);
    }
    for (int64_t c = 0; c < kClasses; ++c) norm += std::exp(z[c] - zmax);
    const int64_t label = y[i].item<int64_t>();
    f.loss += -(z[label] - zmax - std::log(norm)) / n;
    for (int64_t c = 0; c < kClasses; ++c) {
      const double r = std::exp(z[c] - zmax) / norm - (c == label ? 1.0 : 0.0);
      f.db[static_cast<size_t>(c)] += r / n;
      for (int64_t k = 0; k < kFeatures; ++k)
        f.dw[static_cast<size_t>(c * kFeatures + k)] += r * xd[i][k].item<double>() / n;
    }
  }
  return f;
}

TEST(TrainerTrainStep, UnequalCountsAcrossRanksGiveTheGlobalMean) {
  // The step normalises: each rank returns summed losses with their counts, and the ranks'
  // counts differ -- rank r holds the next r + 2 examples of the data (2, 3, 4, ...), split
  // into micro-batches of 1, 2, 1, ... examples, and with 3 ranks or
  // more the last rank holds none (0 micro-batches: it joins the sync without a forward).
  // The synchronised gradient and the mean loss are the float64 closed form of the mean over
  // every example that some rank held, whatever the world size.
  auto comm = make_mpi_comm();
  const int rank = comm->rank(), world = comm->world_size();
  const auto [x, y] = examples();
  checkpoint::NamedTensors params = fresh_params();
  const checkpoint::NamedTensors initial = detached_copy(params);
  TrainStep step(params, *comm, c10::Device(c10::kCPU), options());
  const int holders = world >= 3 ? world - 1 : world;
  std::vector<int64_t> all, mine;
  int64_t next = 0;
  for (int r = 0; r < holders; ++r)
    for (int64_t k = 0; k < r + 2 && next < kExamples; ++k, ++next) {
      all.push_back(next);
      if (r == rank) mine.push_back(next);
    }
  // Micro-batches of 1, 2, 1, 2, ... examples.
  std::vector<std::vector<int64_t>> micro;
  for (size_t i = 0; i < mine.size();) {
    const size_t take = std::min(mine.size() - i, micro.size() % 2 == 0 ? size_t{1} : size_t{2});
    micro.emplace_back(mine.begin() + static_cast<std::ptrdiff_t>(i),
                       mine.begin() + static_cast<std::ptrdiff_t>(i + take));
    i += take;
  }
  const StepResult out = step.run(static_cast<int64_t>(micro.size()), [&](int64_t m) {
    const auto& rows = micro[static_cast<size_t>(m)];
    return MicroBatchLoss{ce_sum(params, x, y, rows), static_cast<int64_t>(rows.size())};
  });
  const ClosedForm want = mean_ce_closed_form(initial, x, y, all);
  int64_t bad = 0;
  bad += out.count.item<double>() == static_cast<double>(all.size()) ? 0 : 1;
  EXPECT_EQ(out.count.item<double>(), static_cast<double>(all.size())) << "rank " << rank;
  bad += out.found_inf.item<float>() == 0.0f ? 0 : 1;
  // The mean loss: the ranks' loss sums over the global count.
  at::Tensor sums = out.loss_sum.to(at::kDouble).reshape({1}).clone();
  comm->all_reduce({sums}, "test loss")->wait();
  const double mean_loss = sums.item<double>() / out.count.item<double>();
  bad += std::abs(mean_loss - want.loss) <= 1e-6 * want.loss ? 0 : 1;
  EXPECT_NEAR(mean_loss, want.loss, 1e-6 * want.loss) << "rank " << rank;
  double max_diff = 0, scale = 0;
  const at::Tensor gw = params[0].second.grad().to(at::kDouble), gb = params[1].second.grad().to(at::kDouble);
  for (int64_t c = 0; c < kClasses; ++c) {
    max_diff = std::max(max_diff, std::abs(gb[c].item<double>() - want.db[static_cast<size_t>(c)]));
    scale = std::max(scale, std::abs(want.db[static_cast<size_t>(c)]));
    for (int64_t k = 0; k < kFeatures; ++k) {
      const double wv = want.dw[static_cast<size_t>(c * kFeatures + k)];
      max_diff = std::max(max_diff, std::abs(gw[c][k].item<double>() - wv));
      scale = std::max(scale, std::abs(wv));
    }
  }
  bad += max_diff <= 1e-6 * scale ? 0 : 1;
  EXPECT_LE(max_diff, 1e-6 * scale) << "rank " << rank << ": gradient differs from the closed form";
  EXPECT_EQ(sum_over_ranks(bad), 0);
}

TEST(TrainerTrainStep, RefusesBadCountsAndLosses) {
  auto comm = make_mpi_comm();
  checkpoint::NamedTensors params = fresh_params();
  TrainStep step(params, *comm, c10::Device(c10::kCPU), options());
  const auto zero = [&](int64_t) { return MicroBatchLoss{params[1].second.sum() * 0.0, 1}; };
  int64_t bad = 0;
  auto expect_refused = [&](const std::function<void()>& f, const std::string& fragment) {
    try {
      f();
      ++bad;
    } catch (const Error& e) {
      bad += std::string(e.what()).find(fragment) == std::string::npos ? 1 : 0;
    }
  };
  // Refused before any collective, on every rank alike.
  expect_refused([&] { step.run(-1, zero); }, "-1 micro-batches");
  expect_refused([&] { step.run(1, [&](int64_t) {
                         return MicroBatchLoss{params[1].second.sum(), -2};
                       }); },
                 "negative count -2");
  expect_refused([&] { step.run(1, [&](int64_t) { return MicroBatchLoss{params[1].second, 1}; }); }, "not one value");
  bad += step.step() == 0 ? 0 : 1;
  EXPECT_EQ(sum_over_ranks(bad), 0);
}

}  // namespace
}  // namespace tupe::trainer
