// SplitMix64 (Steele, Lea and Flood, "Fast splittable pseudorandom number generators",
// OOPSLA 2014; the constants of Vigna's splitmix64.c): the one seed-mixing function of tupe.
//
// Every random number that is derived from plain integers goes through these functions: the
// data path's counter-based keys (data_pipeline/counter_rng.h: epoch orders, masks, the
// train/validation split), GLUE's subsets, example orders and per-run seeds
// (trainer/finetune/), and the per-step dropout seeds. They are pure integer arithmetic, so a
// derived seed is the same on every platform, compiler, rank and thread count. Not
// cryptographic. tests/common/test_mix64.cpp pins them against a Python implementation.
#pragma once
#include <cstdint>
#include <initializer_list>

namespace tupe {

/// SplitMix64's increment: 2^64 / golden ratio, rounded to an odd number.
inline constexpr uint64_t kGoldenGamma = 0x9e3779b97f4a7c15ULL;

/// The SplitMix64 finaliser: a bijection of 64-bit words in which every input bit flips
/// each output bit with probability close to 1/2 (so nearby inputs give unrelated outputs).
constexpr uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

/// One output of the SplitMix64 generator: advances `state` by kGoldenGamma and returns
/// mix64(state). From a state s the k-th output (k = 1, 2, ...) is mix64(s + k * kGoldenGamma),
/// so any output of a stream can also be computed directly.
constexpr uint64_t splitmix64_next(uint64_t& state) {
  state += kGoldenGamma;
  return mix64(state);
}

/// A 64-bit hash of several words, in order (e.g. {seed, purpose, step}): h starts at
/// 0x243f6a8885a308d3 (the first fraction bits of pi) and takes each word w in turn as
///   h = mix64(h ^ (w + kGoldenGamma + (h << 6) + (h >> 2))).
/// The order matters ({1, 2} and {2, 1} differ) and so does the count ({0} and {0, 0}).
constexpr uint64_t hash_words(std::initializer_list<uint64_t> words) {
  uint64_t h = 0x243f6a8885a308d3ULL;
  for (const uint64_t w : words) h = mix64(h ^ (w + kGoldenGamma + (h << 6) + (h >> 2)));
  return h;
}

}  // namespace tupe
