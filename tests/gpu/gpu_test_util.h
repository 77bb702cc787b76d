// Shared pieces of the CUDA tier (label gpu): the process's MPI environment, the skip rule,
// and a real-data-shaped MLM batch. Every test starts with TUPE_REQUIRE_CUDA(), so on a
// machine without a GPU each one reports itself skipped (CTest prints "Skipped").
#pragma once
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <string>

#include "dist/mpi_env.h"
#include "model/config.h"

namespace tupe::gputest {

/// The MpiEnv of this test process (created in main(); a singleton MPI job of one rank).
const dist::MpiEnv& env();
/// Whether LibTorch sees a CUDA device and this build compiled the GPU path.
bool cuda_ready();
/// Why cuda_ready() is false, for the skip message.
std::string why_no_cuda();

/// A small config of `pe` (d 64, 4 heads, 2 layers, vocabulary 120, 32 positions); dropout
/// off so CPU and GPU runs compute the same function.
model::ModelOptions small_config(model::PositionEncoding pe, bool untie_cls);

/// One MLM batch: B = 3 rows of L = 24 ids in [4, 120), row 1 padded after 17 tokens, row
/// 2 after 9; token 0 of each row is [CLS] (id 2); 15% masked positions. Deterministic.
struct MlmBatch {
  at::Tensor input_ids, attention_mask, segment_ids, masked_positions, masked_labels;
  MlmBatch to(const at::Device& device) const;
};
MlmBatch make_batch(uint64_t seed);

/// max |a - b| / max(max |b|, floor), in float64 on the CPU.
double relative_error(const at::Tensor& a, const at::Tensor& b, double floor = 1e-3);

}  // namespace tupe::gputest

#define TUPE_REQUIRE_CUDA()                                              \
  do {                                                                   \
    if (!::tupe::gputest::cuda_ready()) GTEST_SKIP() << ::tupe::gputest::why_no_cuda(); \
  } while (0)
