// T5 relative buckets against the bucket table of docs/model.md ("The relative bias"),
// written here as the table's ranges, for r in [-200, 200]; and the [CLS] buckets.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "model/relative_buckets.h"

namespace {

// The table of docs/model.md, for r <= 0 (n = -r): 0 -> 0; 1..7 -> 1..7; [8,11] -> 8; [12,15] -> 9;
// [16,22] -> 10; [23,31] -> 11; [32,45] -> 12; [46,63] -> 13; [64,90] -> 14; >= 91 -> 15.
// r > 0 uses the same bins offset by 16 (17..23, 24..31); 16 is never produced.
int64_t table_bucket(int64_t r) {
  const int64_t n = r < 0 ? -r : r;
  const int64_t offset = r > 0 ? 16 : 0;
  if (n < 8) return offset + n;
  const int64_t upper[] = {11, 15, 22, 31, 45, 63, 90};
  for (int64_t k = 0; k < 7; ++k)
    if (n <= upper[k]) return offset + 8 + k;
  return offset + 15;
}

TEST(RelativeBuckets, MatchesTupeTableForMinus200To200) {
  for (int64_t r = -200; r <= 200; ++r)
    EXPECT_EQ(tupe::model::t5_relative_bucket(r, 32, 128), table_bucket(r)) << "r = " << r;
}

TEST(RelativeBuckets, BucketSixteenNeverProduced) {
  for (int64_t r = -1000; r <= 1000; ++r) EXPECT_NE(tupe::model::t5_relative_bucket(r, 32, 128), 16) << r;
}

TEST(RelativeBuckets, MatrixUsesJMinusIAndClsBuckets) {
  const int64_t L = 150;
  at::Tensor tied = tupe::model::relative_bucket_matrix(L, 32, 128, /*untie_cls=*/false);
  at::Tensor untied = tupe::model::relative_bucket_matrix(L, 32, 128, /*untie_cls=*/true);
  ASSERT_EQ(tied.sizes(), (at::IntArrayRef{L, L}));
  auto t = tied.accessor<int64_t, 2>();
  auto u = untied.accessor<int64_t, 2>();
  for (int64_t i = 0; i < L; ++i)
    for (int64_t j = 0; j < L; ++j) {
      EXPECT_EQ(t[i][j], table_bucket(j - i));
      if (i == 0)
        EXPECT_EQ(u[i][j], 16) << "[CLS] row";
      else if (j == 0)
        EXPECT_EQ(u[i][j], 32) << "[CLS] column";
      else
        EXPECT_EQ(u[i][j], table_bucket(j - i));
    }
}

}  // namespace
