#include "data_pipeline/masker.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "common/error.h"
#include "data_pipeline/counter_rng.h"

namespace tupe::data_pipeline {

const char* to_string(MaskStrategy s) {
  switch (s) {
    case MaskStrategy::kToken: return "token";
    case MaskStrategy::kWholeWord: return "whole_word";
    case MaskStrategy::kSpan: return "span";
  }
  return "?";
}

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

int64_t span_length_words(double u) {
  constexpr double kP = 0.2;
  constexpr int kMaxWords = 10;
  // F(l) for l = 1..9, computed once (F(10) = 1).
  static const std::array<double, kMaxWords - 1> cdf = [] {
    std::array<double, kMaxWords - 1> f{};
    const double total = 1 - std::pow(1 - kP, kMaxWords);
    for (int l = 1; l < kMaxWords; ++l) f[static_cast<size_t>(l - 1)] = (1 - std::pow(1 - kP, l)) / total;
    return f;
  }();
  for (int l = 1; l < kMaxWords; ++l)
    if (cdf[static_cast<size_t>(l - 1)] > u) return l;
  return kMaxWords;
}

Masker::Masker(MaskingConfig config, SpecialTokens special, int64_t vocab_size, uint64_t seed,
               std::shared_ptr<const WordBoundaries> words)
    : config_(config), special_(special), vocab_size_(vocab_size), seed_(seed), words_(std::move(words)) {
  config_.validate();
  TUPE_CHECK(vocab_size_ > 5, "data: vocabulary of " << vocab_size_ << " ids has no ordinary tokens to mask");
  if (config_.strategy == MaskStrategy::kToken) {
    words_.reset();
    return;
  }
  TUPE_CHECK(words_ != nullptr, "data.mask_strategy = " << to_string(config_.strategy)
                                                        << ": masking whole words needs the vocabulary's word "
                                                           "boundaries; set tokenizer.vocab to the shards' vocabulary");
  TUPE_CHECK(words_->vocab_size() == vocab_size_,
             "data.mask_strategy = " << to_string(config_.strategy) << ": the word boundaries are of a vocabulary of "
                                     << words_->vocab_size() << " ids, the shards' has " << vocab_size_);
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
  if (config_.strategy == MaskStrategy::kToken)
    mask_tokens(epoch, sample_index, ids, n, out, scratch);
  else
    mask_words(epoch, sample_index, ids, n, out, scratch);
}

int32_t Masker::replacement(CounterRng& rng, Treatment treatment, int32_t original) const {
  if (treatment == Treatment::kMask) return special_.mask;
  if (treatment == Treatment::kKeep) return original;
  int32_t id;
  do {
    id = static_cast<int32_t>(rng.below(static_cast<uint64_t>(vocab_size_)));
  } while (is_special(id));
  return id;
}

Masker::Treatment Masker::treatment(double u) const {
  if (u < config_.replace_with_mask) return Treatment::kMask;
  if (u < config_.replace_with_mask + config_.replace_with_random) return Treatment::kRandom;
  return Treatment::kKeep;
}

void Masker::replace_unit(CounterRng& rng, const int32_t* ids, int32_t begin, int32_t end,
                          std::vector<MaskedToken>& out) const {
  const Treatment t = treatment(rng.uniform());
  for (int32_t pos = begin; pos < end; ++pos) out.push_back({pos, ids[pos], replacement(rng, t, ids[pos])});
}

void Masker::mask_tokens(int64_t epoch, int64_t sample_index, const int32_t* ids, int64_t n,
                         std::vector<MaskedToken>& out, std::vector<int32_t>& scratch) const {
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
  for (int64_t j = 0; j < k; ++j) {
    const int32_t pos = scratch[static_cast<size_t>(j)];
    replace_unit(rng, ids, pos, pos + 1, out);
  }
}

void Masker::mask_words(int64_t epoch, int64_t sample_index, const int32_t* ids, int64_t n,
                        std::vector<MaskedToken>& out, std::vector<int32_t>& scratch) const {
  out.clear();
  // One pass: the words (units) start[w], end[w] (exclusive), w < u, in sequence order, and the
  // word of each candidate. scratch: start | end | order | taken | unit_of, n entries each.
  scratch.resize(static_cast<size_t>(5 * n));
  int32_t* start = scratch.data();
  int32_t* end = start + n;
  int32_t* order = end + n;
  int32_t* taken = order + n;  // 0, or the 1-based number of the word's (span's) choice
  int32_t* unit_of = taken + n;
  int64_t c = 0, u = 0;
  bool after_special = true;  // the sequence start counts as a special token before it
  const WordBoundaries& words = *words_;
  for (int64_t i = 0; i < n; ++i) {
    const int32_t id = ids[i];
    if (is_special(id)) {
      after_special = true;
      continue;
    }
    if (after_special || !words.continues(id)) start[u++] = static_cast<int32_t>(i);
    after_special = false;
    end[u - 1] = static_cast<int32_t>(i + 1);
    unit_of[c++] = static_cast<int32_t>(u - 1);
  }
  const int64_t k = masked_count_for(c);
  if (k == 0) return;
  std::fill(taken, taken + u, 0);
  CounterRng rng(rng_key(RngDomain::kMask, seed_, static_cast<uint64_t>(epoch), static_cast<uint64_t>(sample_index)));
  const auto length = [&](int64_t w) { return static_cast<int64_t>(end[w] - start[w]); };
  int64_t covered = 0;
  int32_t choices = 0;
  if (config_.strategy == MaskStrategy::kWholeWord) {
    for (int64_t w = 0; w < u; ++w) order[w] = static_cast<int32_t>(w);
    // A lazy Fisher-Yates shuffle: word j of the random order is drawn when it is visited.
    for (int64_t j = 0; j < u && covered < k; ++j) {
      const auto r = j + static_cast<int64_t>(rng.below(static_cast<uint64_t>(u - j)));
      std::swap(order[j], order[r]);
      const int32_t w = order[j];
      if (covered + length(w) > k) continue;
      covered += length(w);
      taken[w] = ++choices;
    }
  } else {
    const int64_t max_tries = 64 * u + 64;
    for (int64_t tries = 0; covered < k && tries < max_tries; ++tries) {
      const int64_t words = span_length_words(rng.uniform());
      const int32_t first = unit_of[rng.below(static_cast<uint64_t>(c))];
      int32_t last = first;  // exclusive end of the span's words
      const int32_t choice = choices + 1;
      while (last - first < words && last < u && !taken[last] && covered + length(last) <= k &&
             (last == first || start[last] == end[last - 1])) {
        taken[last] = choice;
        covered += length(last);
        ++last;
      }
      if (last > first) {
        choices = choice;
        continue;
      }
      // Nothing taken: stop when no free word fits what is left of the budget.
      bool any_fits = false;
      for (int64_t w = 0; w < u && !any_fits; ++w) any_fits = !taken[w] && covered + length(w) <= k;
      if (!any_fits) break;
    }
  }
  // Every word longer than the budget: one word anyway (a random token's), so that no sequence
  // with candidates goes unmasked (a step of such sequences alone would have nothing to learn).
  if (covered == 0) {
    const int32_t w = unit_of[rng.below(static_cast<uint64_t>(c))];
    taken[w] = 1;
    covered = length(w);
  }
  // In position order: each run of words of one choice (a word, a span) gets one draw.
  out.reserve(static_cast<size_t>(covered));
  for (int64_t w = 0; w < u;) {
    if (!taken[w]) {
      ++w;
      continue;
    }
    int64_t last = w + 1;
    while (last < u && taken[last] == taken[w]) ++last;
    replace_unit(rng, ids, start[w], end[last - 1], out);
    w = last;
  }
}

}  // namespace tupe::data_pipeline
