#include "data_pipeline/masker.h"

#include <algorithm>
#include <cmath>

#include "common/error.h"
#include "data_pipeline/counter_rng.h"

namespace tupe::data_pipeline {

void MaskingConfig::validate() const {
  TUPE_CHECK(mask_probability > 0 && mask_probability <= 1,
             "data.mask_probability: must be in (0, 1], got " << mask_probability);
  TUPE_CHECK(replace_with_mask >= 0 && replace_with_mask <= 1,
             "data.replace_with_mask: must be in [0, 1], got " << replace_with_mask);
  TUPE_CHECK(replace_with_random >= 0 && replace_with_random <= 1,
             "data.replace_with_random: must be in [0, 1], got " << replace_with_random);
  TUPE_CHECK(replace_with_mask + replace_with_random <= 1 + 1e-12,
             "data.replace_with_random: replace_with_mask + replace_with_random must be <= 1, got "
                 << replace_with_mask + replace_with_random);
  TUPE_CHECK(max_predictions >= 0, "data.max_predictions: must be >= 0, got " << max_predictions);
}

Masker::Masker(MaskingConfig config, SpecialTokens special, int64_t vocab_size, uint64_t seed)
    : config_(config), special_(special), vocab_size_(vocab_size), seed_(seed) {
  config_.validate();
  TUPE_CHECK(vocab_size_ > 5, "data: vocabulary of " << vocab_size_ << " ids has no ordinary tokens to mask");
}

int64_t Masker::masked_count_for(int64_t candidates) const {
  if (candidates <= 0) return 0;
  int64_t k = std::llround(config_.mask_probability * static_cast<double>(candidates));
  k = std::clamp<int64_t>(k, 1, candidates);
  if (config_.max_predictions > 0) k = std::min(k, config_.max_predictions);
  return k;
}

int64_t Masker::count(const int32_t* ids, int64_t n) const {
  int64_t c = 0;
  for (int64_t i = 0; i < n; ++i) c += is_special(ids[i]) ? 0 : 1;
  return masked_count_for(c);
}

void Masker::mask(int64_t epoch, int64_t sample_index, const int32_t* ids, int64_t n, std::vector<MaskedToken>& out,
                  std::vector<int32_t>& scratch) const {
  out.clear();
  scratch.clear();
  for (int64_t i = 0; i < n; ++i)
    if (!is_special(ids[i])) scratch.push_back(static_cast<int32_t>(i));
  const auto c = static_cast<int64_t>(scratch.size());
  const int64_t k = masked_count_for(c);
  if (k == 0) return;
  CounterRng rng(rng_key(RngDomain::kMask, seed_, static_cast<uint64_t>(epoch), static_cast<uint64_t>(sample_index)));
  // Partial Fisher-Yates: the first k entries become a uniform k-subset of the candidates.
  for (int64_t j = 0; j < k; ++j) {
    const auto r = j + static_cast<int64_t>(rng.below(static_cast<uint64_t>(c - j)));
    std::swap(scratch[static_cast<size_t>(j)], scratch[static_cast<size_t>(r)]);
  }
  std::sort(scratch.begin(), scratch.begin() + k);
  out.reserve(static_cast<size_t>(k));
  const double p_mask = config_.replace_with_mask;
  const double p_mask_or_random = config_.replace_with_mask + config_.replace_with_random;
  for (int64_t j = 0; j < k; ++j) {
    const int32_t pos = scratch[static_cast<size_t>(j)];
    const int32_t original = ids[pos];
    const double u = rng.uniform();
    int32_t replacement = original;
    if (u < p_mask) {
      replacement = special_.mask;
    } else if (u < p_mask_or_random) {
      do {
        replacement = static_cast<int32_t>(rng.below(static_cast<uint64_t>(vocab_size_)));
      } while (is_special(replacement));
    }
    out.push_back({pos, original, replacement});
  }
}

}  // namespace tupe::data_pipeline
