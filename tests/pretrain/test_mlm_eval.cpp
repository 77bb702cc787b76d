// The sums of an MLM evaluation (trainer/pretrain/step.h's mlm_eval_sums) on fixed logits,
// against the formulas worked in float64 here: CE_m = log sum_v exp(x_mv) - x_m,label and
// correct_m = [the first largest x_mv is at the label]; with a tie, logits in bfloat16, and a
// mismatched shape refused.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "common/error.h"
#include "trainer/pretrain/step.h"

namespace tupe::pretrain {
namespace {

/// (CE sum, correct) of rows `x` against `labels`, by the formulas, in double.
std::pair<double, double> by_hand(const std::vector<std::vector<double>>& x, const std::vector<int64_t>& labels) {
  double ce = 0, correct = 0;
  for (size_t m = 0; m < x.size(); ++m) {
    double z = 0;
    size_t best = 0;
    for (size_t v = 0; v < x[m].size(); ++v) {
      z += std::exp(x[m][v]);
      if (x[m][v] > x[m][best]) best = v;
    }
    ce += std::log(z) - x[m][static_cast<size_t>(labels[m])];
    correct += best == static_cast<size_t>(labels[m]) ? 1 : 0;
  }
  return {ce, correct};
}

at::Tensor as_tensor(const std::vector<std::vector<double>>& x) {
  at::Tensor t = at::empty({static_cast<int64_t>(x.size()), static_cast<int64_t>(x[0].size())}, at::kDouble);
  for (size_t m = 0; m < x.size(); ++m)
    for (size_t v = 0; v < x[m].size(); ++v) t[static_cast<int64_t>(m)][static_cast<int64_t>(v)] = x[m][v];
  return t;
}

TEST(MlmEvalSums, LossAndAccuracyOfFixedLogits) {
  // Row 0: label 2 is the largest (right); row 1: label 0, the largest is 3 (wrong); row 2: a
  // tie between ids 1 and 3, label 3 (wrong: the first maximum is 1); row 3: the same tie,
  // label 1 (right); row 4: every logit equal, label 0 (right).
  const std::vector<std::vector<double>> x = {{0.5, -1.0, 2.25, 0.0},
                                              {1.0, 0.0, -3.0, 1.5},
                                              {0.0, 4.0, -2.0, 4.0},
                                              {0.0, 4.0, -2.0, 4.0},
                                              {0.75, 0.75, 0.75, 0.75}};
  const std::vector<int64_t> labels = {2, 0, 3, 1, 0};
  const auto [ce, correct] = by_hand(x, labels);
  ASSERT_DOUBLE_EQ(correct, 3.0);
  const at::Tensor lab = at::tensor(labels, at::kLong);
  const at::Tensor f64 = mlm_eval_sums(as_tensor(x), lab);
  EXPECT_EQ(f64.scalar_type(), at::kDouble);
  EXPECT_NEAR(f64[0].item<double>(), ce, 1e-12);
  EXPECT_EQ(f64[1].item<double>(), correct);
  const at::Tensor f32 = mlm_eval_sums(as_tensor(x).to(at::kFloat), lab);
  EXPECT_NEAR(f32[0].item<double>(), ce, 1e-5);
  EXPECT_EQ(f32[1].item<double>(), correct);
  // Every value above is exact in bfloat16: widened to float32, the same sums.
  const at::Tensor bf16 = mlm_eval_sums(as_tensor(x).to(at::kBFloat16), lab);
  EXPECT_NEAR(bf16[0].item<double>(), ce, 1e-5);
  EXPECT_EQ(bf16[1].item<double>(), correct);
}

TEST(MlmEvalSums, MismatchedShapesAreRefused) {
  EXPECT_THROW(mlm_eval_sums(at::zeros({3, 4}), at::zeros({2}, at::kLong)), Error);
  EXPECT_THROW(mlm_eval_sums(at::zeros({4}), at::zeros({4}, at::kLong)), Error);
}

}  // namespace
}  // namespace tupe::pretrain
