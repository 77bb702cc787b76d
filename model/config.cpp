#include "model/config.h"

#include <cmath>
#include <limits>
#include <sstream>

namespace tupe::model {

std::string to_string(PositionEncoding p) { return choice_word(p, kPositionEncodingWords); }

PositionEncoding parse_position_encoding(const std::string& text) {
  return parse_choice("key 'position_encoding'", text, kPositionEncodingWords);
}

std::string variant_name(const ModelOptions& c) {
  std::string name;
  switch (c.position_encoding) {
    case PositionEncoding::kBertAbsolute: name = "BERT-A"; break;
    case PositionEncoding::kBertRelative: name = "BERT-R"; break;
    case PositionEncoding::kTupeAbsolute: name = "TUPE-A"; break;
    case PositionEncoding::kTupeRelative: name = "TUPE-R"; break;
    case PositionEncoding::kBertAbsoluteUntied: name = "BERT-A^d"; break;
    case PositionEncoding::kRotary: name = "RoPE"; break;
    case PositionEncoding::kAlibi: name = "ALiBi"; break;
    case PositionEncoding::kNone: name = "NoPE"; break;
  }
  if (c.has_untied_positions() && !c.untie_cls) name += " (tie-cls)";
  if (c.position_encoding == PositionEncoding::kBertRelative && c.untie_cls) name += " (untie-cls)";
  return name;
}

double ModelOptions::attention_scale() const {
  const double dh = static_cast<double>(head_size());
  if (has_positional_query_key()) return 1.0 / std::sqrt(4.0 * dh);
  if (has_untied_positions()) return 1.0 / std::sqrt(2.0 * dh);
  return 1.0 / std::sqrt(dh);
}

int64_t ModelOptions::longest_sequence() const {
  const bool computed = has_rotary() || has_alibi() || position_encoding == PositionEncoding::kNone;
  return computed ? std::numeric_limits<int64_t>::max() : max_positions;
}

void add_model_keys_added_later(KeyValues& saved) {
  saved.emplace("model.rope_base", "10000");  // added with rope (2026-12); only rope reads it
}

void ModelOptions::validate() const {
  fields().check(*this);
  TUPE_CHECK(hidden_size % num_heads == 0, "model.num_heads: " << num_heads << " must divide hidden_size " << hidden_size);
  TUPE_CHECK(relative_buckets % 2 == 0, "model.relative_buckets: must be even and >= 4, got " << relative_buckets);
  TUPE_CHECK(relative_max_distance > relative_buckets / 4,
             "model.relative_max_distance: must exceed relative_buckets / 4, got " << relative_max_distance);
  TUPE_CHECK(!untie_cls || has_untied_positions() || has_relative_bias(),
             "model.untie_cls: the [CLS] untie resets a learned positional logit term; position_encoding = "
                 << to_string(position_encoding) << " has none (set untie_cls = false)");
  TUPE_CHECK(!has_rotary() || head_size() % 2 == 0,
             "model.num_heads: rope rotates pairs of features, so d_h = hidden_size / num_heads must be even, got "
                 << head_size());
}

const FieldTable<ModelOptions>& ModelOptions::fields() {
  using M = ModelOptions;
  static const FieldTable<M> table = [] {
    FieldTable<M> t("model");
    t.integer("vocab_size", &M::vocab_size, 0, "ids",
              "vocabulary size V: token ids in [0, V); 0 = the shards' (pre-training resolves it; checkpoints "
              "record the value)")
        .at_least(0)
        .at_most(1 << 24)
        .integer("hidden_size", &M::hidden_size, 768, "elements", "model width d")
        .positive()
        .at_most(1 << 16)
        .integer("num_layers", &M::num_layers, 12, "", "encoder layers")
        .positive()
        .at_most(1024)
        .integer("num_heads", &M::num_heads, 12, "", "attention heads H (d_h = d / H; H divides d)")
        .positive()
        .at_most(1 << 12)
        .integer("ffn_size", &M::ffn_size, 3072, "elements", "feed-forward inner width (4 d)")
        .positive()
        .at_most(1 << 20)
        .integer("max_positions", &M::max_positions, 512, "tokens",
                 "longest sequence L the model trains, fine-tunes and predicts on: the rows of a position table, "
                 "the L x L of the relative buckets (rope, alibi and none compute positions for any length)")
        .at_least(2)
        .at_most(1 << 14)
        .integer("type_vocab_size", &M::type_vocab_size, 0, "", "segment (token type) ids; 0 = no segment embedding")
        .at_least(0)
        .at_most(1024)
        .real("hidden_dropout", &M::hidden_dropout, 0.1, "probability", "dropout on embeddings and sublayer outputs")
        .at_least(0)
        .below(1)
        .real("attention_dropout", &M::attention_dropout, 0.1, "probability", "dropout on attention probabilities")
        .at_least(0)
        .below(1)
        .real("layer_norm_eps", &M::layer_norm_eps, 1e-12, "", "LayerNorm epsilon (BERT: 1e-12; the paper's code: 1e-5)")
        .positive()
        .choice("position_encoding", &M::position_encoding, kPositionEncodingWords, PositionEncoding::kTupeRelative,
                "the positional-encoding variant (docs/model.md)")
        .boolean("untie_cls", &M::untie_cls, true,
                 "TUPE Eq. 9: the [CLS] row and column of the positional term reset (needs a positional logit term)")
        .choice("layer_norm", &M::layer_norm, kLayerNormWords, LayerNormPlacement::kPost,
                "LayerNorm after the residual add (post, BERT) or before each sublayer (pre)")
        .integer("relative_buckets", &M::relative_buckets, 32, "", "T5 relative buckets (bidirectional; even); the "
                 "bias table has buckets + 1 rows")
        .at_least(4)
        .at_most(1 << 16)
        .integer("relative_max_distance", &M::relative_max_distance, 128, "tokens",
                 "T5 max relative distance (> relative_buckets / 4)")
        .positive()
        .at_most(1 << 30)
        .real("init_std", &M::init_std, 0.02, "", "standard deviation of the N(0, s) init of weights and tables")
        .positive()
        .real("rope_base", &M::rope_base, 10000.0, "",
              "the base b of RoPE's rotation frequencies theta_i = b^(-2i / d_h) (RoFormer Eq. 15); read by rope "
              "only, but recorded and compared on resume for every encoding, as relative_buckets is")
        .at_least(2)
        .at_most(1e12);
    return t;
  }();
  return table;
}

ModelOptions model_config_from_saved(const KeyValues& saved, const std::string& where) {
  KeyValues with_later = saved;
  add_model_keys_added_later(with_later);
  KeyValues model_kv;
  for (const auto& [k, v] : with_later)
    if (k.rfind("model.", 0) == 0) model_kv[k.substr(6)] = v;
  std::vector<std::string> missing;
  for (const auto& f : ModelOptions::fields().fields())
    if (!model_kv.count(f.name)) missing.push_back("model." + f.name);
  if (!missing.empty()) {
    std::ostringstream os;
    for (size_t i = 0; i < missing.size(); ++i) os << (i ? ", " : "") << missing[i];
    TUPE_FAIL(where << ": the saved config lacks " << missing.size() << " model key(s): " << os.str());
  }
  ModelOptions config;
  ModelOptions::fields().apply(config, model_kv, where + " [model]");
  try {
    config.validate();
    TUPE_CHECK(config.vocab_size > 0, "model.vocab_size: 0 (a checkpoint records the resolved size)");
  } catch (const Error& e) {
    TUPE_FAIL(where << ": saved " << e.what());
  }
  return config;
}

}  // namespace tupe::model
