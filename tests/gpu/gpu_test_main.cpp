// GoogleTest main of the CUDA tier and its shared helpers: one MPI environment (a
// singleton job, started by the first test that builds a communicator); without a GPU each
// test skips itself.
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include <algorithm>
#include <vector>

#include <cstdio>
#include <memory>

#include "dist/communicator.h"
#include "dist/make_communicator.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/model/model_test_util.h"

namespace tupe::gputest {

namespace {
std::unique_ptr<dist::MpiEnv>& env_slot() {
  static std::unique_ptr<dist::MpiEnv> env;
  return env;
}
}  // namespace

const dist::MpiEnv& env() {
  // Created at first use: only the tests that build communicators start MPI.
  if (!env_slot()) env_slot() = std::make_unique<dist::MpiEnv>(nullptr, nullptr);
  return *env_slot();
}

bool cuda_ready() { return torch::cuda::is_available() && dist::nccl_compiled(); }

std::string why_no_cuda() {
  if (!torch::cuda::is_available()) return "no CUDA device visible to LibTorch (CPU machine): GPU test skipped";
  return "this build did not compile the CUDA/NCCL path (see the 'tupe: CUDA' CMake line): GPU test skipped";
}

model::ModelOptions small_config(model::PositionEncoding pe, bool untie_cls) {
  model::ModelOptions c = model::testing::small_config(pe, untie_cls, /*d=*/64, /*H=*/4);  // dropout off
  c.vocab_size = 120;
  c.ffn_size = 128;
  c.max_positions = 32;
  c.type_vocab_size = 0;
  return c;
}

MlmBatch MlmBatch::to(const at::Device& device) const {
  return {input_ids.to(device), attention_mask.to(device), segment_ids.defined() ? segment_ids.to(device) : at::Tensor(),
          masked_positions.to(device), masked_labels.to(device)};
}

MlmBatch make_batch(uint64_t seed) {
  const int64_t B = 3, L = 24;
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  MlmBatch b;
  b.input_ids = at::randint(4, 120, {B, L}, gen, at::kLong);
  b.attention_mask = at::ones({B, L}, at::kLong);
  b.input_ids.select(1, 0).fill_(2);  // [CLS]
  b.attention_mask[1].slice(0, 17).fill_(0);
  b.attention_mask[2].slice(0, 9).fill_(0);
  b.input_ids.masked_fill_(b.attention_mask.eq(0), 0);  // [PAD]
  // Masked positions: every position p with (p * 7 + seed) % 100 < 15 that is a real,
  // non-[CLS] token, plus one per row so no row is without.
  std::vector<int64_t> positions;
  for (int64_t r = 0; r < B; ++r)
    for (int64_t t = 1; t < L; ++t) {
      const int64_t flat = r * L + t;
      const bool real = b.attention_mask[r][t].item<int64_t>() == 1;
      if (real && ((flat * 7 + static_cast<int64_t>(seed)) % 100 < 15 || t == 3)) positions.push_back(flat);
    }
  b.masked_positions = at::tensor(positions, at::kLong);
  b.masked_labels = b.input_ids.reshape({-1}).index_select(0, b.masked_positions).clone();
  b.input_ids.view({-1}).index_fill_(0, b.masked_positions, 3);  // [MASK]
  return b;
}

double relative_error(const at::Tensor& a, const at::Tensor& b, double floor) {
  const at::Tensor x = a.detach().to(at::kCPU, at::kDouble), y = b.detach().to(at::kCPU, at::kDouble);
  const double scale = std::max(y.abs().max().item<double>(), floor);
  return (x - y).abs().max().item<double>() / scale;
}

}  // namespace tupe::gputest

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (!tupe::gputest::cuda_ready())
    std::printf("tupe GPU tier: %s\n", tupe::gputest::why_no_cuda().c_str());
  const int rc = RUN_ALL_TESTS();
  tupe::gputest::env_slot().reset();
  return rc;
}
