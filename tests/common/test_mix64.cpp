// common/mix64.h against published SplitMix64 outputs and against a Python implementation
// written here (arbitrary-precision integers masked to 64 bits, independent of C++'s
// unsigned wrap-around).
#include <gtest/gtest.h>

#include <cstdint>
#include <sstream>
#include <vector>

#include "common/mix64.h"
#include "tests/common/common_test_util.h"

namespace tupe {
namespace {

// The reference: SplitMix64 as in Vigna's splitmix64.c, hash_words as documented in mix64.h.
constexpr const char* kPythonReference = R"PY(
M = (1 << 64) - 1
GAMMA = 0x9E3779B97F4A7C15

def mix64(x):
    x ^= x >> 30
    x = (x * 0xBF58476D1CE4E5B9) & M
    x ^= x >> 27
    x = (x * 0x94D049BB133111EB) & M
    return x ^ (x >> 31)

def hash_words(words):
    h = 0x243F6A8885A308D3
    for w in words:
        h = mix64(h ^ ((w + GAMMA + ((h << 6) & M) + (h >> 2)) & M))
    return h

inputs = [0, 1, 2, 3, M, M - 1, 1 << 63, 0x0123456789ABCDEF] + [(i * 0xD1B54A32D192ED03) & M for i in range(1, 65)]
for x in inputs:
    print("mix64", x, mix64(x))
for seed in (0, 1234567, M):
    s = seed
    for k in range(4):
        s = (s + GAMMA) & M
        print("next", seed, k, mix64(s))
for words in ([], [0], [0, 0], [1, 2], [2, 1], [42, 1, 0], [42, 2, 3], [M, M, M], inputs[:5], inputs[5:8]):
    print("hash", len(words), *words, hash_words(words))
)PY";

TEST(CommonMix64, PublishedSplitMix64Outputs) {
  // Vigna's splitmix64.c seeded with 1234567: the first five outputs.
  uint64_t state = 1234567;
  const std::vector<uint64_t> want = {6457827717110365317ull, 3203168211198807973ull, 9817491932198370423ull,
                                      4593380528125082431ull, 16408922859458223821ull};
  for (const uint64_t w : want) EXPECT_EQ(splitmix64_next(state), w);
  EXPECT_EQ(state, 1234567 + 5 * kGoldenGamma);
}

TEST(CommonMix64, PinnedValues) {
  // From the Python reference above (also checked live by MatchesPythonReference).
  EXPECT_EQ(mix64(0), 0u);
  EXPECT_EQ(mix64(1), 6238072747940578789ull);
  EXPECT_EQ(mix64(UINT64_MAX), 13029008266876403067ull);
  EXPECT_EQ(mix64(0x0123456789abcdefull), 12880392674509918508ull);
  EXPECT_EQ(hash_words({}), 2611923443488327891ull);
  EXPECT_EQ(hash_words({0}), 7058444493416231145ull);
  EXPECT_EQ(hash_words({0, 0}), 16398879539870504274ull);
  EXPECT_EQ(hash_words({1, 2}), 3914700915544500315ull);
  EXPECT_EQ(hash_words({2, 1}), 1125471544465552397ull);
  // GLUE: the init seed of run seed 42 and the example order of its epoch 3.
  EXPECT_EQ(hash_words({42, 1, 0}), 14800892179860726167ull);
  EXPECT_EQ(hash_words({42, 2, 3}), 7213702295179060345ull);
  EXPECT_EQ(hash_words({UINT64_MAX, UINT64_MAX, UINT64_MAX}), 17519335276270715422ull);
  static_assert(mix64(1) == 6238072747940578789ull, "mix64 is usable at compile time");
}

TEST(CommonMix64, StreamOutputKIsMixOfStatePlusKGammas) {
  for (const uint64_t seed : {0ull, 99ull, 0xfedcba9876543210ull}) {
    uint64_t state = seed;
    for (uint64_t k = 1; k <= 100; ++k) EXPECT_EQ(splitmix64_next(state), mix64(seed + k * kGoldenGamma));
  }
}

/// hash_words of 0 to 5 words given as a vector (hash_words takes an initializer_list).
uint64_t hash_of(const std::vector<uint64_t>& w) {
  switch (w.size()) {
    case 0: return hash_words({});
    case 1: return hash_words({w[0]});
    case 2: return hash_words({w[0], w[1]});
    case 3: return hash_words({w[0], w[1], w[2]});
    case 4: return hash_words({w[0], w[1], w[2], w[3]});
    case 5: return hash_words({w[0], w[1], w[2], w[3], w[4]});
  }
  ADD_FAILURE() << "hash_of: " << w.size() << " words";
  return 0;
}

TEST(CommonMix64, MatchesPythonReference) {
  common_test::ScratchDir dir("mix64");
  std::istringstream lines(common_test::run_python(kPythonReference, dir));
  int mixes = 0, nexts = 0, hashes = 0;
  for (std::string kind; lines >> kind;) {
    if (kind == "mix64") {
      uint64_t x = 0, y = 0;
      lines >> x >> y;
      EXPECT_EQ(mix64(x), y) << "mix64(" << x << ")";
      ++mixes;
    } else if (kind == "next") {
      uint64_t seed = 0, k = 0, y = 0;
      lines >> seed >> k >> y;
      uint64_t state = seed;
      for (uint64_t i = 0; i < k; ++i) splitmix64_next(state);
      EXPECT_EQ(splitmix64_next(state), y) << "seed " << seed << " output " << k;
      ++nexts;
    } else if (kind == "hash") {
      size_t n = 0;
      lines >> n;
      std::vector<uint64_t> words(n);
      for (auto& w : words) lines >> w;
      uint64_t y = 0;
      lines >> y;
      EXPECT_EQ(hash_of(words), y) << n << " words";
      ++hashes;
    } else {
      FAIL() << "unexpected line kind '" << kind << "'";
    }
  }
  EXPECT_EQ(mixes, 72);
  EXPECT_EQ(nexts, 12);
  EXPECT_EQ(hashes, 10);
}

}  // namespace
}  // namespace tupe
