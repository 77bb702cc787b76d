// Dynamic masking for the masked-LM objective (BERT, Devlin et al. 2019, sec. 3.1; dynamic as
// in RoBERTa sec. 4.1), stateless.
//
// Candidates are the positions whose token is not special ([PAD], [UNK], [CLS], [SEP],
// [MASK]). Of c candidates exactly k = min(c, max(1, round(mask_probability * c))) are chosen
// (k = 0 when c = 0; capped at max_predictions when that is > 0), uniformly without
// replacement. Each chosen token independently becomes [MASK] with probability
// replace_with_mask, a uniformly random non-special id with probability replace_with_random,
// and stays unchanged otherwise (BERT's 80/10/10). Every choice is a pure function of
// (seed, epoch, global sample index) through a counter-based RNG (counter_rng.h), so the mask
// of a sample never depends on threads, world size, or which batch the sample lands in.
#pragma once
#include <cstdint>
#include <vector>

#include "common/config_fields.h"
#include "data_pipeline/tokenizer.h"

namespace tupe::data_pipeline {

struct MaskingConfig {
  double mask_probability = 0.15;     ///< fraction of candidate tokens predicted (rounded, >= 1)
  double replace_with_mask = 0.8;     ///< of those, probability of [MASK]
  double replace_with_random = 0.1;   ///< of those, probability of a random non-special id
  int64_t max_predictions = 0;        ///< cap on masked tokens per sequence; 0 = none
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

/// Applies the rule above. Immutable; mask() may be called from several threads.
class Masker {
 public:
  /// Throws tupe::Error for an invalid config or a vocabulary without non-special ids.
  Masker(MaskingConfig config, SpecialTokens special, int64_t vocab_size, uint64_t seed);
  /// Chooses the masks of sample `sample_index` in `epoch` for its `n` ids; `out` receives
  /// them sorted by position. `scratch` is reused storage (one per thread).
  void mask(int64_t epoch, int64_t sample_index, const int32_t* ids, int64_t n, std::vector<MaskedToken>& out,
            std::vector<int32_t>& scratch) const;
  /// Number of positions mask() chooses for these ids (without drawing them).
  int64_t count(const int32_t* ids, int64_t n) const;
  /// k for c candidates (the rule above).
  int64_t masked_count_for(int64_t candidates) const;
  bool is_special(int32_t id) const {
    return id == special_.pad || id == special_.unk || id == special_.cls || id == special_.sep || id == special_.mask;
  }

 private:
  MaskingConfig config_;
  SpecialTokens special_;
  int64_t vocab_size_;
  uint64_t seed_;
};

}  // namespace tupe::data_pipeline
