// The global sample order (docs/architecture.md "Invariants").
//
// Epoch e visits the N samples in the order of a pseudo-random permutation that is a pure
// function of (seed, e): never of world size, thread count or resume point. Optimizer step t
// of the epoch consumes the global positions [t*B, (t+1)*B) of that order (B = global batch),
// and rank r of W takes the contiguous slice [r*B/W, (r+1)*B/W) of it. An epoch has
// floor(N / B) steps whatever W is; the last N mod B positions of each epoch are dropped.
// The whole position is (epoch, consumed samples) (LoaderState), so a run resumes with any W.
//
// The permutation is a balanced Feistel network (6 rounds, SplitMix64 round function keyed by
// (seed, epoch)) on the smallest even bit width 2h with 2^(2h) >= N, restricted to [0, N) by
// cycle walking (Black and Rogaway, "Ciphers with arbitrary finite domains", CT-RSA 2002):
// O(1) memory and O(1) expected time per position, and any position can be looked up directly.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

namespace tupe::data_pipeline {

/// Where the data stream stands: the loader's entire state.
struct LoaderState {
  int64_t epoch = 0;             ///< current epoch (0-based)
  int64_t consumed_samples = 0;  ///< global samples of this epoch already handed out (all ranks)
  bool operator==(const LoaderState&) const = default;
};

/// A permutation of [0, n) keyed by (seed, epoch). Cheap to construct; thread-safe.
class EpochPermutation {
 public:
  EpochPermutation(int64_t n, uint64_t seed, int64_t epoch);
  /// The sample index at position p (0 <= p < n).
  int64_t at(int64_t p) const;

 private:
  uint64_t feistel(uint64_t x) const;

  int64_t n_;
  int half_bits_;
  uint64_t half_mask_;
  uint64_t round_keys_[6];
};

/// The global batch plan over N samples with global batch B.
class GlobalSampler {
 public:
  /// Throws tupe::Error when B < 1 or N < B ("dataset has N samples, fewer than one global
  /// batch of B"). `shuffle` false keeps the natural order (evaluation).
  GlobalSampler(int64_t num_samples, int64_t global_batch_size, uint64_t seed, bool shuffle = true);
  int64_t num_samples() const { return n_; }
  int64_t global_batch_size() const { return b_; }
  /// floor(N / B): the same for every world size.
  int64_t steps_per_epoch() const { return n_ / b_; }
  /// The same position with an exhausted epoch rolled over: (e, c) with c + B > N becomes
  /// (e + 1, 0). Throws tupe::Error for a negative epoch or c outside [0, N].
  LoaderState normalize(LoaderState s) const;
  /// The position `steps` steps after `s` (pure; normalised).
  LoaderState advance(LoaderState s, int64_t steps) const;
  /// Sample index at global position p of epoch e.
  int64_t sample_at(int64_t epoch, int64_t position) const;
  /// Global sample indices of the whole step starting at (normalised) `s`: the epoch order
  /// at positions [c, c + B).
  void step_indices(LoaderState s, std::vector<int64_t>& out) const;
  /// Rows [first, second) of the global batch that rank `rank` of `world_size` takes: its
  /// contiguous slice [rank*B/W, (rank+1)*B/W). Throws when W does not divide B.
  std::pair<int64_t, int64_t> rank_rows(int64_t rank, int64_t world_size) const;

 private:
  int64_t n_, b_;
  uint64_t seed_;
  bool shuffle_;
};

}  // namespace tupe::data_pipeline
