// Helpers for the model tests: small configs and random parameters.
#pragma once
#include <ATen/ATen.h>
#include <torch/nn/module.h>

#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>

#include "model/config.h"

namespace tupe::model::testing {

/// The seed of a randomised test: $TUPE_TEST_SEED when set (to replay a failure), else a
/// fresh one from std::random_device. Callers SCOPED_TRACE(seed_text(seed)), so a failure
/// prints the seed and how to rerun with it.
inline uint64_t test_seed() {
  if (const char* s = std::getenv("TUPE_TEST_SEED"); s != nullptr && *s) return std::strtoull(s, nullptr, 10);
  return std::random_device{}();
}
inline std::string seed_text(uint64_t seed) {
  return "seed " + std::to_string(seed) + " (rerun with TUPE_TEST_SEED=" + std::to_string(seed) + ")";
}

/// A small config of the given variant; dropout off.
inline ModelOptions small_config(PositionEncoding pe, bool untie_cls, int64_t d = 16, int64_t H = 4) {
  ModelOptions c;
  c.vocab_size = 50;
  c.hidden_size = d;
  c.num_layers = 2;
  c.num_heads = H;
  c.ffn_size = 2 * d;
  c.max_positions = 40;
  c.hidden_dropout = 0.0;
  c.attention_dropout = 0.0;
  c.position_encoding = pe;
  c.untie_cls = untie_cls;
  c.relative_buckets = 32;
  c.relative_max_distance = 128;
  return c;
}

/// Overwrites every parameter with N(0, std) so that biases, LayerNorm affine terms and
/// tables are all non-trivial (zero biases would hide their misuse).
inline void randomize(torch::nn::Module& m, double std = 0.5) {
  torch::NoGradGuard g;
  for (auto& p : m.parameters()) p.normal_(0.0, std);
}

}  // namespace tupe::model::testing
