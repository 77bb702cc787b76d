// Dynamic masking for the masked-LM objective (BERT, Devlin et al. 2019, sec. 3.1; dynamic as
// in RoBERTa sec. 4.1), stateless, with three choices of what is masked together
// (data.mask_strategy).
//
// Candidates are the positions whose token is not special ([PAD], [UNK], [CLS], [SEP],
// [MASK]). The budget of a sample with c candidates is k = min(c, max(1, round(mask_probability
// * c))) (k = 0 when c = 0; capped at max_predictions when that is > 0).
//   token       exactly k candidates, uniformly without replacement; each chosen token
//               independently becomes [MASK] with probability replace_with_mask, a uniformly
//               random non-special id with probability replace_with_random, and stays unchanged
//               otherwise (BERT's 80/10/10).
//   whole_word  the unit is a word (word_boundaries.h): the words are visited in a uniformly
//               random order and each is taken whole while it fits in what is left of the
//               budget (a word longer than that is skipped, as in Google's BERT
//               create_pretraining_data.py and HF's DataCollatorForWholeWordMask), until k tokens
//               are taken or every word was visited. So k - (longest word - 1) <= masked <= k,
//               and masked = k when every word is one piece; when no word fits (every word
//               longer than k), the word of a uniformly drawn candidate is masked whole, so a
//               sequence with candidates always has one (then masked is that word's length). One 80/10/10 draw per word: all its
//               pieces become [MASK], all random ids (one draw each), or all stay.
//   span        SpanBERT's spans (Joshi et al. 2020, sec. 3.1): a span length l in words from
//               the geometric distribution p = 0.2 clipped to 1..10 (renormalised: mean 3.80),
//               an anchor token drawn uniformly among the candidates and moved to the start of
//               its word; the span takes l contiguous words from there, each whole while it fits
//               in the budget, stopping early at a special token, an already masked word or the
//               sequence end. Repeated until k tokens are taken or no unmasked word fits what is
//               left (at most 64 x words + 64 tries); no word fitting: one word as above. One
//               80/10/10 draw per span.
// Every choice is a pure function of (seed, epoch, global sample index) through a counter-based
// RNG (counter_rng.h), so the mask of a sample never depends on threads, world size, or which
// batch the sample lands in. For token the masked count is k, known without reading the
// sample; for whole_word and span it depends on the words drawn (count_known_without_reading).
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "common/config_fields.h"
#include "data_pipeline/tokenizer.h"
#include "data_pipeline/word_boundaries.h"

namespace tupe::data_pipeline {

class CounterRng;

/// What is masked together (data.mask_strategy): the rules above.
enum class MaskStrategy {
  kToken,      ///< word pieces independently (BERT's original rule)
  kWholeWord,  ///< whole words
  kSpan,       ///< SpanBERT's geometric spans of whole words
};
inline constexpr Choice<MaskStrategy> kMaskStrategyWords[] = {
    {"token", MaskStrategy::kToken}, {"whole_word", MaskStrategy::kWholeWord}, {"span", MaskStrategy::kSpan}};
/// "token" | "whole_word" | "span".
const char* to_string(MaskStrategy s);

struct MaskingConfig {
  double mask_probability = 0.15;     ///< fraction of candidate tokens predicted (rounded, >= 1)
  double replace_with_mask = 0.8;     ///< of those, probability of [MASK]
  double replace_with_random = 0.1;   ///< of those, probability of a random non-special id
  int64_t max_predictions = 0;        ///< cap on masked tokens per sequence; 0 = none
  MaskStrategy strategy = MaskStrategy::kToken;  ///< what is masked together
  /// Throws tupe::Error "data.<key>: <cause>" for probabilities outside [0, 1] or a
  /// mask + random sum above 1.
  void validate() const;
};

/// One chosen position.
struct MaskedToken {
  int32_t position;     ///< index in the sample (0-based), ascending in a result
  int32_t original;     ///< the label: the token before masking
  int32_t replacement;  ///< what the input shows: [MASK], a random id, or the original
};

/// SpanBERT's span length in words for a uniform u in [0, 1): the smallest l in 1..10 with
/// F(l) > u, F(l) = (1 - 0.8^l) / (1 - 0.8^10) (the geometric distribution, p = 0.2, clipped
/// at 10 and renormalised).
int64_t span_length_words(double u);

/// Applies the rules above. Immutable; mask() may be called from several threads.
class Masker {
 public:
  /// `words` is required for whole_word and span (ignored for token). Throws tupe::Error for
  /// an invalid config, a vocabulary without non-special ids, a missing `words` ("data.mask_strategy
  /// = whole_word: ... tokenizer.vocab") or one of another vocabulary size.
  Masker(MaskingConfig config, SpecialTokens special, int64_t vocab_size, uint64_t seed,
         std::shared_ptr<const WordBoundaries> words = nullptr);
  /// Chooses the masks of sample `sample_index` in `epoch` for its `n` ids; `out` receives
  /// them sorted by position. `scratch` is reused storage (one per thread).
  void mask(int64_t epoch, int64_t sample_index, const int32_t* ids, int64_t n, std::vector<MaskedToken>& out,
            std::vector<int32_t>& scratch) const;
  /// The budget k of these ids (without drawing): what mask() chooses for token, an upper
  /// bound for whole_word and span.
  int64_t count(const int32_t* ids, int64_t n) const;
  /// k for c candidates (the rule above).
  int64_t masked_count_for(int64_t candidates) const;
  /// Whether mask()'s count follows from the candidate count alone (token), so a loader can
  /// count other ranks' masked tokens without reading their samples.
  bool count_known_without_reading() const { return config_.strategy == MaskStrategy::kToken; }
  MaskStrategy strategy() const { return config_.strategy; }
  bool is_special(int32_t id) const {
    return id == special_.pad || id == special_.unk || id == special_.cls || id == special_.sep || id == special_.mask;
  }

 private:
  void mask_tokens(int64_t epoch, int64_t sample_index, const int32_t* ids, int64_t n, std::vector<MaskedToken>& out,
                   std::vector<int32_t>& scratch) const;
  void mask_words(int64_t epoch, int64_t sample_index, const int32_t* ids, int64_t n, std::vector<MaskedToken>& out,
                  std::vector<int32_t>& scratch) const;
  /// BERT's 80/10/10: what a chosen unit shows.
  enum class Treatment { kMask, kRandom, kKeep };
  /// The treatment of a uniform u in [0, 1): [MASK] below replace_with_mask, a random id below
  /// replace_with_mask + replace_with_random, else the original.
  Treatment treatment(double u) const;
  /// What one piece shows under `treatment` (a random id is drawn from `rng` per piece).
  int32_t replacement(CounterRng& rng, Treatment treatment, int32_t original) const;
  /// One 80/10/10 draw for the pieces [begin, end) of one unit (a token, a word, a span),
  /// appended to `out`.
  void replace_unit(CounterRng& rng, const int32_t* ids, int32_t begin, int32_t end, std::vector<MaskedToken>& out) const;

  MaskingConfig config_;
  SpecialTokens special_;
  int64_t vocab_size_;
  uint64_t seed_;
  std::shared_ptr<const WordBoundaries> words_;
};

}  // namespace tupe::data_pipeline
