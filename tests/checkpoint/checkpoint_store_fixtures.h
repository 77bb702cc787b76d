// Shared pieces of the checkpoint store's tests (test_checkpoint.cpp, test_checkpoint_integrity.cpp):
// recognisable contents per step, bitwise comparison, coreutils' sha256sum as the independent
// hash, a one-bit corruption, and the messages of the errors a call throws.
#pragma once
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "checkpoint/checkpoint_store.h"
#include "checkpoint/durable_io.h"
#include "checkpoint/safetensors.h"
#include "common/error.h"
#include "tests/checkpoint/checkpoint_test_util.h"
#include "trainer/optimizer.h"

namespace tupe::checkpoint::testing {

namespace fs = std::filesystem;

/// A checkpoint with recognisable contents for step `step`.
inline CheckpointContents make_contents(int64_t step) {
  at::manual_seed(1000 + step);
  CheckpointContents c;
  c.model = {{"encoder.embeddings.word.weight", at::randn({11, 4})},
             {"encoder.layers.0.attention.query.bias", at::randn({4}).to(at::kHalf)},
             {"mlm_head.bias", at::randn({11}).to(at::kBFloat16)},
             {"encoder.positional.relative_bias.weight", at::randn({33, 2}, at::kDouble)}};
  NamedTensors params;
  for (const auto& [name, t] : c.model)
    if (t.scalar_type() == at::kFloat) params.emplace_back(name, t.clone());
  trainer::OptimizerOptions oo;
  trainer::AdamW opt(params, oo);
  for (auto& [name, p] : params) p.mutable_grad() = at::randn_like(p);
  opt.step(1e-3);
  c.optimizer = opt.state_dict();
  c.state.step = step;
  c.state.scheduler_step = std::max<int64_t>(step - 1, 0);
  c.state.loss_scaler = {0.1 * step, 7, 1, 3};  // 0.1 * step: not a power of two, still exact in JSON
  c.state.data = {2, 12345 + step};
  c.state.config = {{"model.hidden_size", "4"}, {"optimizer.lr", "0.0001"}, {"run.note", "a \"quoted\" value"}};
  c.state.vocab_sha256 = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";
  c.state.world_size = 8;
  return c;
}

/// Expects `a` and `b` to hold the same names with bitwise-equal tensors.
inline void expect_same(const NamedTensors& a, const NamedTensors& b) {
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [name, t] : a) {
    const at::Tensor other = find_tensor(b, name);
    ASSERT_TRUE(other.defined()) << name;
    EXPECT_TRUE(testing::bitwise_equal(t, other)) << name;
  }
}

/// SHA-256 of a file by coreutils' sha256sum: an implementation independent of ours.
inline std::string sha256sum(const fs::path& file) {
  const std::string cmd = "sha256sum '" + file.string() + "'";
  FILE* pipe = ::popen(cmd.c_str(), "r");
  if (!pipe) return "popen failed";
  char hex[65] = {0};
  const size_t got = std::fread(hex, 1, 64, pipe);
  ::pclose(pipe);
  return std::string(hex, got);
}

/// Flips one bit of the byte `from_end` bytes before the end of `file` (size unchanged).
inline void flip_byte(const fs::path& file, uint64_t from_end) {
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  const auto pos = static_cast<std::streamoff>(fs::file_size(file) - from_end);
  f.seekg(pos);
  char c = 0;
  f.read(&c, 1);
  f.seekp(pos);
  c = static_cast<char>(c ^ 0x10);
  f.write(&c, 1);
}

/// SHA-256 of `bytes` by coreutils' sha256sum (written to a scratch file under `dir`).
inline std::string sha256sum_of_bytes(const fs::path& dir, const std::string& bytes) {
  const fs::path f = dir / "scratch-bytes";
  write_file_atomic(f, bytes);
  const std::string hex = sha256sum(f);
  fs::remove(f);
  return hex;
}

template <class F>
inline std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return std::string();
}

/// The message of the tupe::Error that loading the checkpoint folder `p` throws; "" when none.
inline std::string load_error(const fs::path& p) {
  try {
    CheckpointStore::load(p);
  } catch (const Error& e) {
    return std::string(e.what());
  }
  return std::string();
}

/// Store options for `dir` keeping the newest `keep_last` and every `keep_every`-th step (0: all).
inline CheckpointOptions options_for(const fs::path& dir, int64_t keep_last = 0, int64_t keep_every = 0) {
  CheckpointOptions o;
  o.dir = dir.string();
  o.keep_last = keep_last;
  o.keep_every = keep_every;
  return o;
}

}  // namespace tupe::checkpoint::testing
