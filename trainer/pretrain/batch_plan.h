// How a global batch is split over ranks and micro-batches.
//
//   global batch B = W ranks x k accumulation steps x b micro-batch (sequences)
//
// B and W are given; b is train.micro_batch_size, or, when that is 0, derived: the largest
// divisor of the per-rank batch B / W that is at most train.max_micro_batch_size (the
// memory cap). Gradient accumulation is exact (the loss is divided by the GLOBAL masked
// count), so any valid split trains the same model; only speed and memory differ. The paper
// presets (B = 256, b derived, cap 32) start for every W that divides 256.
#pragma once
#include <cstdint>

namespace tupe::pretrain {

struct BatchPlan {
  int64_t local_batch = 0;   ///< B / W: sequences per rank per optimizer step
  int64_t micro_batch = 0;   ///< b: sequences per forward/backward
  int64_t accumulation = 0;  ///< k = (B / W) / b micro-steps per optimizer step
};

/// Splits `global_batch` over `world_size` ranks. `micro_batch` > 0 is taken as given and
/// must divide B / W; 0 derives it (largest divisor of B / W that is <= max_micro_batch).
/// Throws tupe::Error naming the key and the exact override that would work:
/// "data.global_batch_size: ... not divisible by the world size ..." or
/// "train.micro_batch_size: 32 does not divide the per-rank batch 16 ...; pass
/// --train.micro_batch_size 16 ...".
BatchPlan plan_batches(int64_t global_batch, int64_t world_size, int64_t micro_batch, int64_t max_micro_batch);

/// The largest divisor of n that is <= cap (>= 1 for n, cap >= 1).
int64_t largest_divisor_at_most(int64_t n, int64_t cap);

}  // namespace tupe::pretrain
