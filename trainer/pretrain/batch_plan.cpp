#include "trainer/pretrain/batch_plan.h"

#include "common/error.h"

namespace tupe::pretrain {

int64_t largest_divisor_at_most(int64_t n, int64_t cap) {
  TUPE_CHECK(n >= 1 && cap >= 1, "largest_divisor_at_most: need n >= 1 and cap >= 1, got " << n << ", " << cap);
  for (int64_t d = cap < n ? cap : n; d > 1; --d)
    if (n % d == 0) return d;
  return 1;
}

BatchPlan plan_batches(int64_t global_batch, int64_t world_size, int64_t micro_batch, int64_t max_micro_batch) {
  TUPE_CHECK(world_size >= 1, "world size: must be >= 1, got " << world_size);
  TUPE_CHECK(global_batch >= 1, "data.global_batch_size: must be positive, got " << global_batch);
  TUPE_CHECK(micro_batch >= 0, "train.micro_batch_size: must be >= 0 (0 = derive), got " << micro_batch);
  TUPE_CHECK(max_micro_batch >= 1, "train.max_micro_batch_size: must be positive, got " << max_micro_batch);
  if (global_batch % world_size != 0) {
    const int64_t below = global_batch / world_size * world_size, above = below + world_size;
    TUPE_FAIL("data.global_batch_size: " << global_batch << " is not divisible by the world size " << world_size
                                         << "; run on a number of ranks that divides it, or pass "
                                         << "--data.global_batch_size " << (below > 0 ? below : above)
                                         << (below > 0 ? " or " + std::to_string(above) : std::string())
                                         << " (this changes the optimisation)");
  }
  BatchPlan plan;
  plan.local_batch = global_batch / world_size;
  if (micro_batch == 0) {
    plan.micro_batch = largest_divisor_at_most(plan.local_batch, max_micro_batch);
  } else {
    TUPE_CHECK(plan.local_batch % micro_batch == 0,
               "train.micro_batch_size: "
                   << micro_batch << " does not divide the per-rank batch " << plan.local_batch << " (global batch "
                   << global_batch << " / " << world_size << " ranks); pass --train.micro_batch_size "
                   << largest_divisor_at_most(plan.local_batch, micro_batch) << " (the largest divisor of "
                   << plan.local_batch << " up to " << micro_batch << "), or 0 to derive it");
    plan.micro_batch = micro_batch;
  }
  plan.accumulation = plan.local_batch / plan.micro_batch;
  return plan;
}

}  // namespace tupe::pretrain
