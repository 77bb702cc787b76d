// GLUE metrics against hand-worked cases and against scikit-learn / scipy (the GLUE
// benchmark's implementations), run in this test through $TUPE_PYTHON.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <random>

#include "tests/finetune/glue_test_util.h"
#include "trainer/finetune/metrics.h"

namespace tupe::finetune {
namespace {

TEST(GlueMetrics, HandWorkedCases) {
  // pred 1 0 1 1 vs gold 1 1 1 0: TP 2, FP 1, FN 1, TN 0.
  const std::vector<int64_t> p{1, 0, 1, 1}, g{1, 1, 1, 0};
  EXPECT_DOUBLE_EQ(accuracy(p, g), 0.5);
  EXPECT_DOUBLE_EQ(f1_score(p, g), 2.0 / 3.0);                 // 2 TP / (2 TP + FP + FN) = 4 / 6
  EXPECT_NEAR(matthews_corrcoef(p, g), -1.0 / 3.0, 1e-15);     // (TP TN - FP FN) / sqrt(3 3 1 1)
  // TP 2, FP 1, TN 2, FN 1: (4 - 1) / sqrt(3^4) = 1/3.
  EXPECT_NEAR(matthews_corrcoef({1, 1, 0, 0, 1, 0}, {1, 0, 0, 0, 1, 1}), 1.0 / 3.0, 1e-15);
  EXPECT_DOUBLE_EQ(matthews_corrcoef({1, 0, 1}, {1, 0, 1}), 1.0);
  EXPECT_DOUBLE_EQ(matthews_corrcoef({1, 1, 1}, {1, 0, 1}), 0.0);  // constant prediction: undefined -> 0
  EXPECT_DOUBLE_EQ(f1_score({0, 0}, {0, 0}), 0.0);
  // x 1 2 3, y 2 4 7: sxy 5, sxx 2, syy 114/9.
  EXPECT_NEAR(pearson({1, 2, 3}, {2, 4, 7}), 5.0 / std::sqrt(2.0 * 114.0 / 9.0), 1e-15);
  EXPECT_EQ(average_ranks({10, 20, 20, 5}), (std::vector<double>{2, 3.5, 3.5, 1}));
  // ranks of x: 1 2.5 2.5 4, of y: 1 3 2 4 -> 4.5 / sqrt(4.5 * 5).
  EXPECT_NEAR(spearman({1, 2, 2, 3}, {1, 3, 2, 4}), 4.5 / std::sqrt(22.5), 1e-15);
  EXPECT_DOUBLE_EQ(pearson({1, 1, 1}, {1, 2, 3}), 0.0);  // constant input: undefined -> 0
  EXPECT_THROW(accuracy({1}, {1, 0}), Error);
  EXPECT_THROW(pearson({}, {}), Error);
}

TEST(GlueMetrics, TaskMetricSets) {
  EXPECT_EQ(metric_names(find_task("CoLA", "t")), (std::vector<std::string>{"mcc", "accuracy"}));
  EXPECT_EQ(metric_names(find_task("STS-B", "t")), (std::vector<std::string>{"pearson", "spearman"}));
  EXPECT_EQ(metric_names(find_task("MRPC", "t")), (std::vector<std::string>{"accuracy", "f1"}));
  EXPECT_EQ(metric_names(find_task("QQP", "t")), (std::vector<std::string>{"accuracy", "f1"}));
  EXPECT_EQ(metric_names(find_task("MNLI", "t")), (std::vector<std::string>{"accuracy"}));
  for (const auto& t : all_tasks()) EXPECT_EQ(metric_names(t).front(), t.primary_metric) << t.name;
}

TEST(GlueMetrics, MatchScikitLearnAndScipy) {
  std::mt19937_64 rng(20210603);
  nlohmann::json cases = nlohmann::json::array();
  struct Case {
    std::vector<int64_t> p, g;
    std::vector<double> x, y;
  };
  std::vector<Case> mine;
  // Binary labels of several sizes and biases, a 3-class case (MNLI-like), and scores with ties.
  for (int k = 0; k < 6; ++k) {
    Case c;
    const int n = 50 + 97 * k, classes = k == 5 ? 3 : 2;
    std::uniform_int_distribution<int> label(0, classes - 1);
    std::bernoulli_distribution agree(0.55 + 0.06 * k);
    for (int i = 0; i < n; ++i) {
      const int64_t gold = label(rng);
      c.g.push_back(gold);
      c.p.push_back(agree(rng) ? gold : label(rng));
    }
    cases.push_back({{"kind", "labels"}, {"pred", c.p}, {"gold", c.g}});
    mine.push_back(c);
  }
  for (int k = 0; k < 4; ++k) {
    Case c;
    std::normal_distribution<double> noise(0.0, 0.3 + 0.5 * k);
    std::uniform_int_distribution<int> gold_step(0, 25);  // STS-B-like scores 0.0, 0.2, ..., 5.0 (ties)
    for (int i = 0; i < 120 + 40 * k; ++i) {
      const double gold = 0.2 * gold_step(rng);
      c.y.push_back(gold);
      c.x.push_back(k == 3 ? std::round(gold + noise(rng)) : gold + noise(rng));  // k 3: ties in the predictions too
    }
    cases.push_back({{"kind", "scores"}, {"pred", c.x}, {"gold", c.y}});
    mine.push_back(c);
  }
  testing::ScratchDir dir;
  testing::write_text(dir.path() / "cases.json", nlohmann::json{{"cases", cases}}.dump());
  std::string out;
  ASSERT_EQ(testing::run_python("metrics_ref.py", "'" + (dir.path() / "cases.json").string() + "'", &out), 0) << out;
  const auto ref = nlohmann::json::parse(out)["results"];
  ASSERT_EQ(ref.size(), mine.size());
  for (size_t i = 0; i < mine.size(); ++i) {
    const Case& c = mine[i];
    if (!c.p.empty()) {
      EXPECT_NEAR(accuracy(c.p, c.g), ref[i]["accuracy"].get<double>(), 1e-12) << i;
      EXPECT_NEAR(matthews_corrcoef(c.p, c.g), ref[i]["mcc"].get<double>(), 1e-12) << i;
      if (ref[i].contains("f1")) {
        EXPECT_NEAR(f1_score(c.p, c.g), ref[i]["f1"].get<double>(), 1e-12) << i;
      }
    } else {
      EXPECT_NEAR(pearson(c.x, c.y), ref[i]["pearson"].get<double>(), 1e-12) << i;
      EXPECT_NEAR(spearman(c.x, c.y), ref[i]["spearman"].get<double>(), 1e-12) << i;
    }
  }
}

}  // namespace
}  // namespace tupe::finetune
