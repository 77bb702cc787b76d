// Model configuration of TUPE-BERT (../shared/TUPE.md). Plain struct with a documented
// default per field; validate() is pure and throws tupe::Error naming the key; the same
// FieldTable drives --help, INI parsing, printing and checkpoint compatibility checks.
#pragma once
#include <cstdint>
#include <string>

#include "common/config_fields.h"

namespace tupe::model {

/// The positional-encoding variants of the paper (TUPE.md, "Four positional-encoding variants").
enum class PositionEncoding {
  kBertAbsolute,  ///< BERT-A: absolute position embedding added to the word embedding
  kBertRelative,  ///< BERT-R: BERT-A + T5 relative bias b_{bucket(j-i)} in the logits
  kTupeAbsolute,  ///< TUPE-A: untied positional term reset(P) in the logits (Eq. 7, 10)
  kTupeRelative,  ///< TUPE-R: reset(P + B) (Eq. 8, 11)
};
std::string to_string(PositionEncoding p);
/// Throws tupe::Error for an unknown name.
PositionEncoding parse_position_encoding(const std::string& text);

enum class LayerNormPlacement { kPost, kPre };

struct ModelConfig {
  int64_t vocab_size = 30522;        ///< V: token ids in [0, V)
  int64_t hidden_size = 768;         ///< d: model width (e.g. 768)
  int64_t num_layers = 12;           ///< encoder layers (e.g. 12)
  int64_t num_heads = 12;            ///< H: attention heads; d_h = d / H
  int64_t ffn_size = 3072;           ///< FFN inner width (4 d)
  int64_t max_positions = 512;       ///< longest sequence L the position table serves
  int64_t type_vocab_size = 0;       ///< segment (token type) ids; 0 = no segment embedding
  double hidden_dropout = 0.1;       ///< dropout on embeddings and sublayer outputs
  double attention_dropout = 0.1;    ///< dropout on attention probabilities
  double layer_norm_eps = 1e-12;     ///< LayerNorm epsilon (BERT: 1e-12)
  PositionEncoding position_encoding = PositionEncoding::kTupeRelative;
  bool untie_cls = true;             ///< TUPE Eq. 9 [CLS] reset (needs a positional logit term)
  LayerNormPlacement layer_norm = LayerNormPlacement::kPost;
  int64_t relative_buckets = 32;     ///< T5 buckets (bidirectional), table has buckets + 1 rows
  int64_t relative_max_distance = 128;  ///< T5 max distance
  double init_std = 0.02;            ///< N(0, init_std) init of weights, position and bias tables

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
  /// T5 relative bias B in the logits (Eq. 8, 11).
  bool has_relative_bias() const {
    return position_encoding == PositionEncoding::kBertRelative ||
           position_encoding == PositionEncoding::kTupeRelative;
  }
  /// Rows of the position table: max_positions, +1 with the [CLS] untie in TUPE (row 0 plays
  /// theta_1, row 1 theta_2, position t >= 1 uses row t + 1; TUPE.md "Untying [CLS]").
  int64_t position_table_rows() const {
    return max_positions + ((has_untied_positions() && untie_cls) ? 1 : 0);
  }
  /// Word-term scale: 1/sqrt(d_h) for BERT-A/R, 1/sqrt(2 d_h) for TUPE (TUPE.md).
  double attention_scale() const;

  /// Throws tupe::Error "model.<key>: <cause>" on an inconsistent config.
  void validate() const;

  /// The one field table (help text with units) for this struct.
  static const FieldTable<ModelConfig>& fields();
};

/// The ModelConfig a checkpoint saved as "model.<key>" entries of its effective config
/// (trainer_state.json), strictly: every key of the field table must be there (a default
/// never fills a gap: defaults change between versions), each parsed and the whole
/// validated. Throws tupe::Error "<where>: the saved config lacks N model key(s): ..." or
/// "<where>: saved model.<key>: ...". Used by every reader of checkpoints.
ModelConfig model_config_from_saved(const KeyValues& saved_config, const std::string& where);

}  // namespace tupe::model
