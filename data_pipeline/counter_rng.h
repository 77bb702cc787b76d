// Stateless, counter-based random numbers for the data path.
//
// Every random choice of the data path (the epoch order, the masks, the train/validation
// split) is a pure function of a key built from plain integers (seed, epoch, global sample
// index, ...), never of a shared stream: the same key gives the same numbers whatever the
// thread count, world size or resume point. The generator is SplitMix64 (common/mix64.h):
// output k of a key is mix64(key + k * kGoldenGamma), so numbers of a key can be drawn in
// any order.
#pragma once
#include <cstdint>

#include "common/mix64.h"

namespace tupe::data_pipeline {

/// Domains keep keys of different uses apart (the same (seed, epoch, index) must not give
/// the epoch order and the masks the same numbers).
enum class RngDomain : uint64_t {
  kEpochOrder = 0x6f72646572ULL,  // "order"
  kMask = 0x6d61736bULL,          // "mask"
  kSplit = 0x73706c6974ULL,       // "split"
};

/// Key of (domain, seed, a, b): distinct tuples give unrelated keys.
inline uint64_t rng_key(RngDomain domain, uint64_t seed, uint64_t a, uint64_t b = 0) {
  uint64_t k = mix64(static_cast<uint64_t>(domain) ^ kGoldenGamma);
  k = mix64(k ^ seed);
  k = mix64(k + 0x632be59bd9b4e019ULL + a);
  k = mix64(k + 0x8cb92ba72f3d8dd7ULL + b);
  return k;
}

/// SplitMix64 stream of one key. Cheap to make (one per sample); not shared between threads.
class CounterRng {
 public:
  explicit CounterRng(uint64_t key) : state_(key) {}
  /// The next 64 random bits.
  uint64_t next_u64() { return splitmix64_next(state_); }
  /// Uniform double in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }
  /// Uniform integer in [0, n) for n >= 1 (multiply-shift; bias below 2^-40 for n < 2^24).
  uint64_t below(uint64_t n) {
    return static_cast<uint64_t>((static_cast<unsigned __int128>(next_u64()) * n) >> 64);
  }

 private:
  uint64_t state_;  ///< the key plus kGoldenGamma per number drawn
};

}  // namespace tupe::data_pipeline
