// Shared pieces of the CUDA tier (label gpu): the process's MPI environment, the skip rule,
// and a real-data-shaped MLM batch. Every test starts with TUPE_REQUIRE_CUDA(), so on a
// machine without a GPU each one reports itself skipped (CTest prints "Skipped").
#pragma once
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <string>

#if __has_include(<c10/cuda/CUDAFunctions.h>) && __has_include(<cuda_runtime_api.h>)
#include <c10/cuda/CUDAFunctions.h>
#define TUPE_GPU_TEST_SYNC_DEBUG 1
#endif

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

/// RAII: CUDA's sync debug mode (torch.cuda.set_sync_debug_mode) at `mode` while alive, the
/// previous mode restored at scope exit. NoSyncScope: "error", so any host synchronisation
/// LibTorch makes on the CUDA side (item(), a copy to the host, a stream or device
/// synchronize) throws. SyncCheckPaused: off, for a part that may sync (a forward inside a
/// step under NoSyncScope). Without the CUDA headers (a CPU build) both do nothing.
#ifdef TUPE_GPU_TEST_SYNC_DEBUG
class SyncDebugScope {
 public:
  explicit SyncDebugScope(c10::cuda::SyncDebugMode mode) : saved_(c10::cuda::warning_state().get_sync_debug_mode()) {
    c10::cuda::warning_state().set_sync_debug_mode(mode);
  }
  ~SyncDebugScope() { c10::cuda::warning_state().set_sync_debug_mode(saved_); }
  SyncDebugScope(const SyncDebugScope&) = delete;
  SyncDebugScope& operator=(const SyncDebugScope&) = delete;

 private:
  c10::cuda::SyncDebugMode saved_;
};
struct NoSyncScope : SyncDebugScope {
  NoSyncScope() : SyncDebugScope(c10::cuda::SyncDebugMode::L_ERROR) {}
};
struct SyncCheckPaused : SyncDebugScope {
  SyncCheckPaused() : SyncDebugScope(c10::cuda::SyncDebugMode::L_DISABLED) {}
};
#else
struct NoSyncScope {};
struct SyncCheckPaused {};
#endif

/// max |a - b| / max(max |b|, floor), in float64 on the CPU.
double relative_error(const at::Tensor& a, const at::Tensor& b, double floor = 1e-3);

}  // namespace tupe::gputest

#define TUPE_REQUIRE_CUDA()                                              \
  do {                                                                   \
    if (!::tupe::gputest::cuda_ready()) GTEST_SKIP() << ::tupe::gputest::why_no_cuda(); \
  } while (0)
