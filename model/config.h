// Model configuration of TUPE-BERT (docs/model.md). Every field -- its meaning, unit, default
// and range -- is described once, in the field table in config.cpp (common/config_fields.h;
// `tupe info --help` prints it, docs/config.md lists it); the same table drives INI parsing,
// printing and the checkpoint compatibility checks. validate() is pure and throws
// tupe::Error naming the key.
#pragma once
#include <cstdint>
#include <string>

#include "common/config_fields.h"

namespace tupe::model {

/// The positional-encoding variants: the paper's five, RoPE, ALiBi and NoPE (docs/model.md "Eight variants").
enum class PositionEncoding {
  kBertAbsolute,  ///< BERT-A: absolute position embedding added to the word embedding
  kBertRelative,  ///< BERT-R: BERT-A + T5 relative bias b_{bucket(j-i)} in the logits
  kTupeAbsolute,  ///< TUPE-A: untied positional term reset(P) in the logits (Eq. 7, 10)
  kTupeRelative,  ///< TUPE-R: reset(P + B) (Eq. 8, 11)
  /// BERT-A^d (Sec. 4.3): word-only input; every layer's q and k get the shared projected
  /// positions LN(p) U^Q, LN(p) U^K added, so the logits hold all four word/position terms,
  /// each with its own projections, scaled by 1/sqrt(4 d_h) (docs/model.md "BERT-A^d").
  kBertAbsoluteUntied,
  /// RoPE (Su et al., RoFormer, 2021): q and k of every layer rotated by their position, no
  /// position table; q_m . k_n then depends on m - n only (docs/model.md "RoPE").
  kRotary,
  /// ALiBi (Press et al., 2022), symmetric for an encoder as MosaicBERT uses it: the constant
  /// per-head bias -m_h |i - j| in the logits, no position table (docs/model.md "ALiBi").
  kAlibi,
  /// NoPE: no positional information at all (the encoder is then permutation-equivariant).
  kNone,
};
inline constexpr Choice<PositionEncoding> kPositionEncodingWords[] = {
    {"bert-absolute", PositionEncoding::kBertAbsolute},
    {"bert-relative", PositionEncoding::kBertRelative},
    {"tupe-absolute", PositionEncoding::kTupeAbsolute},
    {"tupe-relative", PositionEncoding::kTupeRelative},
    {"bert-absolute-untied", PositionEncoding::kBertAbsoluteUntied},
    {"rope", PositionEncoding::kRotary},
    {"alibi", PositionEncoding::kAlibi},
    {"none", PositionEncoding::kNone}};
/// The word of `p` ("tupe-relative", ...).
std::string to_string(PositionEncoding p);
/// The variant of a word; throws tupe::Error "key 'position_encoding': expected ..., got '<text>'".
PositionEncoding parse_position_encoding(const std::string& text);

/// Where each sublayer's LayerNorm sits.
enum class LayerNormPlacement {
  kPost,  ///< after the residual add (BERT)
  kPre,   ///< before each sublayer, with a final LayerNorm
};
inline constexpr Choice<LayerNormPlacement> kLayerNormWords[] = {{"post", LayerNormPlacement::kPost},
                                                                {"pre", LayerNormPlacement::kPre}};

struct ModelOptions {
  ModelOptions() { fields().reset(*this); }
  int64_t vocab_size;
  int64_t hidden_size;
  int64_t num_layers;
  int64_t num_heads;
  int64_t ffn_size;
  int64_t max_positions;
  int64_t type_vocab_size;
  double hidden_dropout;
  double attention_dropout;
  double layer_norm_eps;
  PositionEncoding position_encoding;
  bool untie_cls;
  LayerNormPlacement layer_norm;
  int64_t relative_buckets;
  int64_t relative_max_distance;
  double init_std;
  double rope_base;

  int64_t head_size() const { return hidden_size / num_heads; }
  bool has_absolute_input_positions() const {
    return position_encoding == PositionEncoding::kBertAbsolute ||
           position_encoding == PositionEncoding::kBertRelative;
  }
  /// TUPE's untied term P (Eq. 7, 10) in the logits.
  bool has_untied_positions() const {
    return position_encoding == PositionEncoding::kTupeAbsolute ||
           position_encoding == PositionEncoding::kTupeRelative;
  }
  /// The positional table p with its own LayerNorm and projections U^Q, U^K (d -> d, with
  /// biases), shared by all layers: TUPE-A/R (for P) and BERT-A^d (added to q and k).
  bool has_position_projections() const {
    return has_untied_positions() || position_encoding == PositionEncoding::kBertAbsoluteUntied;
  }
  /// BERT-A^d: LN(p) U^Q + c^Q and LN(p) U^K + c^K are added to every layer's q and k
  /// (rather than forming a separate logit term).
  bool has_positional_query_key() const { return position_encoding == PositionEncoding::kBertAbsoluteUntied; }
  /// T5 relative bias B in the logits (Eq. 8, 11).
  bool has_relative_bias() const {
    return position_encoding == PositionEncoding::kBertRelative ||
           position_encoding == PositionEncoding::kTupeRelative;
  }
  /// ALiBi's constant distance bias in the logits (no parameters, no gradient).
  bool has_alibi() const { return position_encoding == PositionEncoding::kAlibi; }
  /// RoPE: every layer's q and k rotated by position before the logits.
  bool has_rotary() const { return position_encoding == PositionEncoding::kRotary; }
  /// A positional term added to the logits of every layer (TUPE's P, the relative bias B, both,
  /// or ALiBi's bias): the (H, L, L) attention bias of model/positional.h. False for BERT-A,
  /// BERT-A^d, RoPE and NoPE, whose attention gets at most the padding mask.
  bool has_positional_logit_term() const { return has_learned_logit_term() || has_alibi(); }
  /// A positional logit term with parameters (TUPE's P, the relative bias B): the attention
  /// bias then needs a gradient in training.
  bool has_learned_logit_term() const { return has_untied_positions() || has_relative_bias(); }
  /// The longest sequence the model can run: max_positions where a learned table or the
  /// precomputed buckets serve positions; none (INT64_MAX) for RoPE, ALiBi and NoPE, whose
  /// positions are computed for any length (tupe analyze scores them past the trained length;
  /// training, fine-tuning and prediction still hold sequences to max_positions).
  int64_t longest_sequence() const;
  /// Rows of the position table: max_positions, +1 with the [CLS] untie in TUPE (row 0 plays
  /// theta_1, row 1 theta_2, position t >= 1 uses row t + 1; docs/model.md "Untying [CLS]").
  int64_t position_table_rows() const {
    return max_positions + ((has_untied_positions() && untie_cls) ? 1 : 0);
  }
  /// Word-term scale: 1/sqrt(d_h) for BERT-A/R, RoPE, ALiBi, NoPE, 1/sqrt(2 d_h) for TUPE (docs/model.md, Eq. 10),
  /// 1/sqrt(4 d_h) for BERT-A^d (its four terms, Sec. 4.3).
  double attention_scale() const;

  /// The field table's ranges, and the rules that involve several fields (num_heads divides
  /// hidden_size, relative_max_distance > relative_buckets / 4, untie_cls needs TUPE's term or
  /// the relative bias, RoPE needs an even d_h). Throws tupe::Error "model.<key>: <cause>".
  void validate() const;

  static const FieldTable<ModelOptions>& fields();
};

/// The ModelOptions a checkpoint saved as "model.<key>" entries of its effective config
/// (trainer_state.json), strictly: every key of the field table must be there (a default
/// never fills a gap: defaults change between versions; the one exception is a key added
/// after checkpoints existed, given the value that means what those checkpoints meant:
/// add_model_keys_added_later), each parsed and the whole validated. Throws tupe::Error "<where>: the saved config lacks N model key(s): ..." or
/// "<where>: saved model.<key>: ...". Used by every reader of checkpoints.
ModelOptions model_config_from_saved(const KeyValues& saved_config, const std::string& where);

/// Adds to a saved config the model keys added after checkpoints were first written, each with
/// the value under which the older checkpoint means what it meant (docs/formats.md "Version
/// notes"): model.rope_base = 10000 (it only acts with position_encoding = rope, which such
/// checkpoints cannot have). Keys present are left alone.
void add_model_keys_added_later(KeyValues& saved_config);

/// The variant's name as Table 1 of Ke, He and Liu (2021) writes it: "BERT-A", "BERT-R",
/// "TUPE-A", "TUPE-R", "BERT-A^d"; TUPE with untie_cls off gets " (tie-cls)", BERT-R with it on
/// " (untie-cls)" (its [CLS] buckets). The results table's row and the model card use it.
std::string variant_name(const ModelOptions& config);

}  // namespace tupe::model
