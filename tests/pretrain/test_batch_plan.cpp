// The global-batch arithmetic (trainer/pretrain/batch_plan.h): B = W x k x b for every cluster
// size the paper presets are run at, the derived micro-batch, and the errors that name the
// override which would work. The presets are read from configs/ as `tupe pretrain` reads them.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "common/error.h"
#include "common/ini.h"
#include "data_pipeline/loader_config.h"
#include "trainer/pretrain/batch_plan.h"
#include "trainer/pretrain/train_options.h"
#include "tests/support/test_paths.h"

namespace tupe::pretrain {
namespace {

/// The checkout: TUPE_SOURCE_DIR (CTest), else the one this executable was built from
/// (launch/gpu_check.sh runs it by hand from the build folder).
std::string source_dir() {
  const char* d = std::getenv("TUPE_SOURCE_DIR");
  return d ? d : tupe::testing::source_path();
}

std::string error_of(int64_t B, int64_t W, int64_t b, int64_t cap) {
  try {
    plan_batches(B, W, b, cap);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(BatchPlan, LargestDivisor) {
  EXPECT_EQ(largest_divisor_at_most(256, 32), 32);
  EXPECT_EQ(largest_divisor_at_most(16, 32), 16);
  EXPECT_EQ(largest_divisor_at_most(48, 32), 24);
  EXPECT_EQ(largest_divisor_at_most(17, 16), 1);
  EXPECT_EQ(largest_divisor_at_most(85, 32), 17);
  // Against a brute-force definition for all small cases.
  for (int64_t n = 1; n <= 64; ++n)
    for (int64_t cap = 1; cap <= 70; ++cap) {
      int64_t best = 1;
      for (int64_t d = 1; d <= n && d <= cap; ++d)
        if (n % d == 0) best = d;
      ASSERT_EQ(largest_divisor_at_most(n, cap), best) << n << " " << cap;
    }
}

TEST(BatchPlan, ErrorsNameTheOverrideThatWorks) {
  // The README's cluster example before presets derived the micro-batch: 16 ranks, b = 32.
  EXPECT_EQ(error_of(256, 16, 32, 32),
            "train.micro_batch_size: 32 does not divide the per-rank batch 16 (global batch 256 / 16 ranks); pass "
            "--train.micro_batch_size 16 (the largest divisor of 16 up to 32), or 0 to derive it");
  EXPECT_EQ(error_of(256, 3, 0, 32),
            "data.global_batch_size: 256 is not divisible by the world size 3; run on a number of ranks that divides "
            "it, or pass --data.global_batch_size 255 or 258 (this changes the optimisation)");
  EXPECT_EQ(error_of(4, 8, 0, 32).rfind("data.global_batch_size: 4 is not divisible by the world size 8", 0), 0u);
  EXPECT_NE(error_of(256, 1, -1, 32).find("train.micro_batch_size: must be >= 0"), std::string::npos);
  EXPECT_NE(error_of(256, 1, 0, 0).find("train.max_micro_batch_size: must be positive"), std::string::npos);
  // The suggested override is itself accepted.
  const BatchPlan p = plan_batches(256, 16, 16, 32);
  EXPECT_EQ(p.micro_batch, 16);
  EXPECT_EQ(p.accumulation, 1);
}

TEST(BatchPlan, PaperPresetsStartAtEveryClusterSize) {
  for (const char* name : {"tupe-a-base", "tupe-r-base", "bert-a-base", "bert-r-base", "tupe-r-base-tie-cls"}) {
    const std::string path = source_dir() + "/configs/" + name + ".ini";
    const KeyValues kv = read_ini(path);
    data_pipeline::DataOptions data;
    TrainOptions train;
    data_pipeline::DataOptions::fields().apply(data, ini_section(kv, "data"), path + " [data]");
    TrainOptions::fields().apply(train, ini_section(kv, "train"), path + " [train]");
    ASSERT_EQ(data.global_batch_size, 256) << path;  // the paper's batch (docs/model.md)
    for (int64_t W : {1, 2, 4, 8, 16, 32, 64, 128, 256}) {
      BatchPlan p;
      ASSERT_NO_THROW(p = plan_batches(data.global_batch_size, W, train.micro_batch_size, train.max_micro_batch_size))
          << path << " W=" << W;
      EXPECT_EQ(W * p.accumulation * p.micro_batch, 256) << path << " W=" << W;
      EXPECT_EQ(p.local_batch, 256 / W);
      // The largest micro-batch within the preset's cap: min(32, 256 / W) for these W.
      EXPECT_EQ(p.micro_batch, std::min<int64_t>(train.max_micro_batch_size, 256 / W)) << path << " W=" << W;
      EXPECT_EQ(p.accumulation, (256 / W) / p.micro_batch);
    }
  }
}

TEST(BatchPlan, DerivedMicroBatchForOddRankCounts) {
  // 48 per rank with cap 32: 24 x 2, not 16 x 3.
  BatchPlan p = plan_batches(96, 2, 0, 32);
  EXPECT_EQ(p.local_batch, 48);
  EXPECT_EQ(p.micro_batch, 24);
  EXPECT_EQ(p.accumulation, 2);
  // A prime per-rank batch above the cap degrades to micro-batch 1 (still exact).
  p = plan_batches(37 * 3, 3, 0, 32);
  EXPECT_EQ(p.micro_batch, 1);
  EXPECT_EQ(p.accumulation, 37);
}

}  // namespace
}  // namespace tupe::pretrain
