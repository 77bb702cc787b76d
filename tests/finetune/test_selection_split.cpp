// The selection split (finetune.selection_fraction): rows held out of train to choose epochs
// and LRs, so that the dev sets are scored once. Checked by its properties, not by its draw:
// a partition of the train rows, its size round(fraction x rows), a pure function of
// data_seed, close to uniform over rows, and through load_task_data on the real RTE file:
// the held-out examples are the file's own rows (labels and lengths), none of them trained on.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>

#include "common/error.h"
#include "tests/finetune/glue_test_util.h"
#include "trainer/finetune/task_data.h"

namespace tupe::finetune {
namespace {

using testing::glue_dir;
using testing::uncased_tokenizer;

TEST(GlueSelectionSplit, APartitionOfTheTrainRowsOfTheAskedSize) {
  for (const auto& [rows, fraction] : std::vector<std::pair<int64_t, double>>{{10, 0.1}, {2490, 0.1}, {7, 0.5}, {101, 0.33}}) {
    const auto [train, selection] = selection_rows("T", rows, fraction, 1);
    EXPECT_EQ(static_cast<int64_t>(selection.size()), std::llround(fraction * rows)) << rows << " " << fraction;
    EXPECT_TRUE(std::is_sorted(train.begin(), train.end()));
    EXPECT_TRUE(std::is_sorted(selection.begin(), selection.end()));
    std::vector<int64_t> all(train);
    all.insert(all.end(), selection.begin(), selection.end());
    std::sort(all.begin(), all.end());
    std::vector<int64_t> want(static_cast<size_t>(rows));
    std::iota(want.begin(), want.end(), 0);
    EXPECT_EQ(all, want) << "train and selection are not a partition of 0.." << rows - 1;
  }
}

TEST(GlueSelectionSplit, APureFunctionOfTheDataSeed) {
  EXPECT_EQ(selection_rows("T", 1000, 0.1, 7), selection_rows("T", 1000, 0.1, 7));
  EXPECT_NE(selection_rows("T", 1000, 0.1, 7).second, selection_rows("T", 1000, 0.1, 8).second);
  // Not the train_rows subset's draw: seed s's selection is not the first rows of
  // permutation(rows, s), the order train_rows keeps.
  std::vector<int64_t> first = permutation(1000, 7);
  first.resize(100);
  std::sort(first.begin(), first.end());
  EXPECT_NE(selection_rows("T", 1000, 0.1, 7).second, first);
}

TEST(GlueSelectionSplit, EveryRowEquallyLikelyToBeHeldOut) {
  // 2,000 seeds of 50 rows at 0.2: each row is held out Binomial(2000, 0.2) times, mean 400,
  // standard deviation sqrt(2000 x 0.2 x 0.8) = 17.9; every row within 5 of them (89).
  std::vector<int> held(50, 0);
  for (int64_t seed = 0; seed < 2000; ++seed)
    for (int64_t i : selection_rows("T", 50, 0.2, seed).second) ++held[static_cast<size_t>(i)];
  for (size_t i = 0; i < held.size(); ++i) EXPECT_NEAR(held[i], 400, 89) << "row " << i;
}

TEST(GlueSelectionSplit, AnEmptySideIsRefusedNamingTheKey) {
  for (const auto& [rows, fraction] : std::vector<std::pair<int64_t, double>>{{4, 0.1}, {3, 0.9}, {1, 0.5}}) {
    try {
      selection_rows("RTE", rows, fraction, 1);
      ADD_FAILURE() << rows << " rows at " << fraction << " were not refused";
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("RTE: finetune.selection_fraction"), std::string::npos) << what;
      EXPECT_NE(what.find("at least one"), std::string::npos) << what;
    }
  }
}

TEST(GlueSelectionSplit, RealRteRowsHeldOutAndNotTrainedOn) {
  const TaskSpec& rte = find_task("RTE", "t");
  auto tok = uncased_tokenizer();
  FinetuneOptions whole;
  whole.data_dir = glue_dir();
  whole.predict_test = false;
  const TaskData all = load_task_data(rte, whole, *tok, 128, false, 1);
  FinetuneOptions cfg = whole;
  cfg.selection_fraction = 0.1;
  cfg.data_seed = 3;
  const TaskData data = load_task_data(rte, cfg, *tok, 128, false, 1);
  const auto [train_rows, held] = selection_rows("RTE", static_cast<int64_t>(all.train.size()), 0.1, 3);
  ASSERT_EQ(data.selection.size(), held.size());
  ASSERT_EQ(data.train.size(), train_rows.size());
  EXPECT_EQ(data.selection.size() + data.train.size(), all.train.size());
  EXPECT_EQ(data.selection.name, "selection");
  for (size_t k = 0; k < held.size(); ++k) {
    const auto i = static_cast<size_t>(held[k]);
    EXPECT_EQ(data.selection.ids[k], all.train.ids[i]) << "selection row " << k;
    EXPECT_EQ(data.selection.labels[k], all.train.labels[i]) << "selection row " << k;
  }
  for (size_t k = 0; k < train_rows.size(); ++k)
    ASSERT_EQ(data.train.ids[k], all.train.ids[static_cast<size_t>(train_rows[k])]) << "train row " << k;
  EXPECT_EQ(data.dev.at(0).size(), all.dev.at(0).size());  // the dev set untouched
  EXPECT_EQ(all.selection.size(), 0u);                      // none without the key
}

}  // namespace
}  // namespace tupe::finetune
