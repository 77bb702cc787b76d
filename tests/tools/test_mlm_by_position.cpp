// tupe analyze's masked-LM loss and accuracy by position (tools/analyze/mlm_by_position.h) on
// fixed logits: the buckets of the legend, and per bucket the sums worked here in float64 from
// the formulas CE_m = log sum_v exp(x_mv) - x_m,label and [first argmax == label].
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "common/error.h"
#include "tools/analyze/mlm_by_position.h"

namespace tupe::analyze {
namespace {

TEST(MlmByPosition, TheBucketsOfTheLegend) {
  const std::vector<std::pair<int64_t, int64_t>> want = {{0, 0},  {1, 1},   {7, 1},   {8, 2},   {31, 2},
                                                         {32, 3}, {63, 3},  {64, 4},  {127, 4}, {128, 5},
                                                         {255, 5}, {256, 6}, {511, 6}, {512, 7}};
  for (const auto& [t, k] : want) EXPECT_EQ(position_bucket(t), k) << "position " << t;
  for (int64_t k = 0; k < 9; ++k) {  // every bucket's range maps back to it, and the ranges tile 0..
    const auto [first, last] = bucket_range(k);
    EXPECT_EQ(position_bucket(first), k);
    EXPECT_EQ(position_bucket(last), k);
    if (k > 0) EXPECT_EQ(first, bucket_range(k - 1).second + 1);
  }
  EXPECT_THROW(position_bucket(-1), Error);
}

TEST(MlmByPosition, SumsPerBucketOfFixedLogits) {
  // Five tokens at positions 1, 5 (bucket 1), 40 (bucket 3), 3 (bucket 1), 100 (bucket 4).
  const std::vector<std::vector<double>> x = {
      {2.0, 0.5, -1.0}, {0.0, 1.0, 1.0}, {-0.5, 0.25, 3.0}, {1.0, 1.0, 0.0}, {0.0, 0.0, 0.0}};
  const std::vector<int64_t> labels = {0, 2, 1, 1, 0}, positions = {1, 5, 40, 3, 100};
  std::vector<double> ce(5);
  std::vector<int64_t> right(5);
  for (size_t m = 0; m < 5; ++m) {
    double z = 0;
    size_t best = 0;
    for (size_t v = 0; v < 3; ++v) {
      z += std::exp(x[m][v]);
      if (x[m][v] > x[m][best]) best = v;
    }
    ce[m] = std::log(z) - x[m][static_cast<size_t>(labels[m])];
    right[m] = best == static_cast<size_t>(labels[m]) ? 1 : 0;
  }
  at::Tensor logits = at::empty({5, 3}, at::kFloat);
  for (int64_t m = 0; m < 5; ++m)
    for (int64_t v = 0; v < 3; ++v) logits[m][v] = x[static_cast<size_t>(m)][static_cast<size_t>(v)];
  std::vector<BucketSums> sums;
  add_by_position(logits, at::tensor(labels, at::kLong), at::tensor(positions, at::kLong), sums);
  ASSERT_EQ(sums.size(), 5u);
  EXPECT_EQ(sums[0].masked, 0);
  EXPECT_EQ(sums[1].masked, 3);
  EXPECT_NEAR(sums[1].loss_sum, ce[0] + ce[1] + ce[3], 1e-6);
  EXPECT_EQ(sums[1].correct, right[0] + right[1] + right[3]);
  EXPECT_EQ(sums[1].correct, 1);  // right, then two ties lost to the lower id (1 before 2; 0 before 1)
  EXPECT_EQ(sums[2].masked, 0);
  EXPECT_EQ(sums[3].masked, 1);
  EXPECT_NEAR(sums[3].loss_sum, ce[2], 1e-6);
  EXPECT_EQ(sums[3].correct, 0);
  EXPECT_EQ(sums[4].correct, 1);  // all equal: id 0 first
  const std::string csv = by_position_csv(sums);
  EXPECT_EQ(csv.rfind("bucket,first,last,masked,loss,accuracy\n1,1,7,3,", 0), 0u) << csv;
  EXPECT_NE(csv.find("\n3,32,63,1,"), std::string::npos) << csv;
  EXPECT_NE(csv.find("\nall,,,5,"), std::string::npos) << csv;
  EXPECT_EQ(csv.find("\n0,"), std::string::npos) << "an empty bucket is left out: " << csv;
  EXPECT_THROW(add_by_position(logits, at::tensor(labels, at::kLong), at::zeros({4}, at::kLong), sums), Error);
}

TEST(MlmByPosition, LengthRowsAsCsvQuoteWhatNeedsIt) {
  LengthRow scored;
  scored.shards = "runs/a,runs/b";  // a comma-separated list of shard folders is one cell
  scored.max_seq_len = 64;
  scored.total = {4, 10.0, 1};
  LengthRow skipped;
  skipped.shards = "runs/long";
  skipped.max_seq_len = 256;
  skipped.note = "not scored: up to 256 tokens, \"128\" positions";
  EXPECT_EQ(by_length_csv({scored, skipped}),
            "shards,max_seq_len,masked,loss,accuracy,note\n"
            "\"runs/a,runs/b\",64,4,2.5,0.25,\n"
            "runs/long,256,0,,,\"not scored: up to 256 tokens, \"\"128\"\" positions\"\n");
}

}  // namespace
}  // namespace tupe::analyze
