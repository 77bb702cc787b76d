#include "data_pipeline/sampler.h"

#include "common/error.h"
#include "data_pipeline/counter_rng.h"

namespace tupe::data_pipeline {

EpochPermutation::EpochPermutation(int64_t n, uint64_t seed, int64_t epoch) : n_(n) {
  int bits = 0;
  while (bits < 62 && (int64_t{1} << bits) < n) ++bits;
  half_bits_ = bits <= 2 ? 1 : (bits + 1) / 2;
  half_mask_ = (uint64_t{1} << half_bits_) - 1;
  for (uint64_t r = 0; r < 6; ++r)
    round_keys_[r] = rng_key(RngDomain::kEpochOrder, seed, static_cast<uint64_t>(epoch), r);
}

uint64_t EpochPermutation::feistel(uint64_t x) const {
  uint64_t left = x >> half_bits_, right = x & half_mask_;
  for (const uint64_t key : round_keys_) {
    const uint64_t next = left ^ (mix64(key ^ right) & half_mask_);
    left = right;
    right = next;
  }
  return (left << half_bits_) | right;
}

int64_t EpochPermutation::at(int64_t p) const {
  uint64_t x = static_cast<uint64_t>(p);
  do {
    x = feistel(x);  // a bijection of [0, 2^(2h)); walk until the cycle comes back into [0, n)
  } while (x >= static_cast<uint64_t>(n_));
  return static_cast<int64_t>(x);
}

GlobalSampler::GlobalSampler(int64_t num_samples, int64_t global_batch_size, uint64_t seed, bool shuffle)
    : n_(num_samples), b_(global_batch_size), seed_(seed), shuffle_(shuffle) {
  TUPE_CHECK(b_ >= 1, "data.global_batch_size: must be positive, got " << b_);
  TUPE_CHECK(n_ >= b_, "data: the dataset has " << n_ << " samples, fewer than one global batch of " << b_);
}

LoaderState GlobalSampler::normalize(LoaderState s) const {
  TUPE_CHECK(s.epoch >= 0, "data: loader state epoch " << s.epoch << " is negative");
  TUPE_CHECK(s.consumed_samples >= 0 && s.consumed_samples <= n_,
             "data: loader state consumed_samples " << s.consumed_samples << " outside [0, " << n_ << "]");
  if (s.consumed_samples + b_ > n_) return {s.epoch + 1, 0};
  return s;
}

LoaderState GlobalSampler::advance(LoaderState s, int64_t steps) const {
  s = normalize(s);
  const int64_t left = (n_ - s.consumed_samples) / b_;  // full steps left in this epoch
  if (steps < left) return normalize({s.epoch, s.consumed_samples + steps * b_});
  const int64_t rest = steps - left;
  const int64_t per_epoch = steps_per_epoch();
  return normalize({s.epoch + 1 + rest / per_epoch, (rest % per_epoch) * b_});
}

int64_t GlobalSampler::sample_at(int64_t epoch, int64_t position) const {
  TUPE_CHECK(position >= 0 && position < n_, "data: position " << position << " outside [0, " << n_ << ")");
  if (!shuffle_) return position;
  return EpochPermutation(n_, seed_, epoch).at(position);
}

void GlobalSampler::step_indices(LoaderState s, std::vector<int64_t>& out) const {
  s = normalize(s);
  out.resize(static_cast<size_t>(b_));
  if (!shuffle_) {
    for (int64_t k = 0; k < b_; ++k) out[static_cast<size_t>(k)] = s.consumed_samples + k;
    return;
  }
  const EpochPermutation perm(n_, seed_, s.epoch);
  for (int64_t k = 0; k < b_; ++k) out[static_cast<size_t>(k)] = perm.at(s.consumed_samples + k);
}

std::pair<int64_t, int64_t> GlobalSampler::rank_rows(int64_t rank, int64_t world_size) const {
  TUPE_CHECK(world_size >= 1 && rank >= 0 && rank < world_size,
             "data: rank " << rank << " outside world size " << world_size);
  TUPE_CHECK(b_ % world_size == 0,
             "data.global_batch_size: " << b_ << " is not divisible by the world size " << world_size);
  const int64_t local = b_ / world_size;
  return {rank * local, (rank + 1) * local};
}

}  // namespace tupe::data_pipeline
