#include "model/config.h"

#include <cmath>
#include <sstream>

namespace tupe::model {

std::string to_string(PositionEncoding p) {
  switch (p) {
    case PositionEncoding::kBertAbsolute: return "bert-absolute";
    case PositionEncoding::kBertRelative: return "bert-relative";
    case PositionEncoding::kTupeAbsolute: return "tupe-absolute";
    case PositionEncoding::kTupeRelative: return "tupe-relative";
  }
  return "?";
}

PositionEncoding parse_position_encoding(const std::string& t) {
  for (auto p : {PositionEncoding::kBertAbsolute, PositionEncoding::kBertRelative, PositionEncoding::kTupeAbsolute,
                 PositionEncoding::kTupeRelative})
    if (t == to_string(p)) return p;
  TUPE_FAIL("key 'position_encoding': expected bert-absolute, bert-relative, tupe-absolute or tupe-relative, got '"
            << t << "'");
}

double ModelConfig::attention_scale() const {
  const double dh = static_cast<double>(head_size());
  if (has_untied_positions()) return 1.0 / std::sqrt(2.0 * dh);
  return 1.0 / std::sqrt(dh);
}

void ModelConfig::validate() const {
  TUPE_CHECK(vocab_size > 0, "model.vocab_size: must be positive, got " << vocab_size);
  TUPE_CHECK(hidden_size > 0, "model.hidden_size: must be positive, got " << hidden_size);
  TUPE_CHECK(num_layers > 0, "model.num_layers: must be positive, got " << num_layers);
  TUPE_CHECK(num_heads > 0 && hidden_size % num_heads == 0,
             "model.num_heads: " << num_heads << " must divide hidden_size " << hidden_size);
  TUPE_CHECK(ffn_size > 0, "model.ffn_size: must be positive, got " << ffn_size);
  TUPE_CHECK(max_positions >= 2, "model.max_positions: must be at least 2, got " << max_positions);
  TUPE_CHECK(type_vocab_size >= 0, "model.type_vocab_size: must be >= 0, got " << type_vocab_size);
  TUPE_CHECK(hidden_dropout >= 0 && hidden_dropout < 1, "model.hidden_dropout: must be in [0, 1), got " << hidden_dropout);
  TUPE_CHECK(attention_dropout >= 0 && attention_dropout < 1,
             "model.attention_dropout: must be in [0, 1), got " << attention_dropout);
  TUPE_CHECK(layer_norm_eps > 0, "model.layer_norm_eps: must be positive, got " << layer_norm_eps);
  TUPE_CHECK(relative_buckets >= 4 && relative_buckets % 2 == 0,
             "model.relative_buckets: must be even and >= 4, got " << relative_buckets);
  TUPE_CHECK(relative_max_distance > relative_buckets / 4,
             "model.relative_max_distance: must exceed relative_buckets / 4, got " << relative_max_distance);
  TUPE_CHECK(init_std > 0, "model.init_std: must be positive, got " << init_std);
  TUPE_CHECK(!untie_cls || has_untied_positions() || has_relative_bias(),
             "model.untie_cls: the [CLS] untie resets a positional logit term; " << to_string(position_encoding)
                                                                                  << " has none (set untie_cls = false)");
}

const FieldTable<ModelConfig>& ModelConfig::fields() {
  static const FieldTable<ModelConfig> table = [] {
    FieldTable<ModelConfig> t;
    t.integer("vocab_size", &ModelConfig::vocab_size, "vocabulary size V (ids)")
        .integer("hidden_size", &ModelConfig::hidden_size, "model width d (elements)")
        .integer("num_layers", &ModelConfig::num_layers, "encoder layers")
        .integer("num_heads", &ModelConfig::num_heads, "attention heads H (d_h = d / H)")
        .integer("ffn_size", &ModelConfig::ffn_size, "feed-forward inner width (elements)")
        .integer("max_positions", &ModelConfig::max_positions, "longest sequence the position table serves (tokens)")
        .integer("type_vocab_size", &ModelConfig::type_vocab_size, "segment ids; 0 = no segment embedding")
        .real("hidden_dropout", &ModelConfig::hidden_dropout, "dropout probability on embeddings and sublayer outputs")
        .real("attention_dropout", &ModelConfig::attention_dropout, "dropout probability on attention weights")
        .real("layer_norm_eps", &ModelConfig::layer_norm_eps, "LayerNorm epsilon")
        .custom(
            "position_encoding", "bert-absolute | bert-relative | tupe-absolute | tupe-relative",
            [](const ModelConfig& c) { return to_string(c.position_encoding); },
            [](ModelConfig& c, const std::string& v) { c.position_encoding = parse_position_encoding(v); })
        .boolean("untie_cls", &ModelConfig::untie_cls, "TUPE Eq. 9: [CLS] row/column of the positional term reset")
        .custom(
            "layer_norm", "post | pre: LayerNorm after the residual add (BERT) or before each sublayer",
            [](const ModelConfig& c) { return std::string(c.layer_norm == LayerNormPlacement::kPost ? "post" : "pre"); },
            [](ModelConfig& c, const std::string& v) {
              TUPE_CHECK(v == "post" || v == "pre", "key 'layer_norm': expected post or pre, got '" << v << "'");
              c.layer_norm = v == "post" ? LayerNormPlacement::kPost : LayerNormPlacement::kPre;
            })
        .integer("relative_buckets", &ModelConfig::relative_buckets, "T5 relative buckets (bidirectional)")
        .integer("relative_max_distance", &ModelConfig::relative_max_distance, "T5 max relative distance (tokens)")
        .real("init_std", &ModelConfig::init_std, "standard deviation of the N(0, s) weight init");
    return t;
  }();
  return table;
}

ModelConfig model_config_from_saved(const KeyValues& saved, const std::string& where) {
  KeyValues model_kv;
  for (const auto& [k, v] : saved)
    if (k.rfind("model.", 0) == 0) model_kv[k.substr(6)] = v;
  std::vector<std::string> missing;
  for (const auto& f : ModelConfig::fields().fields())
    if (!model_kv.count(f.name)) missing.push_back("model." + f.name);
  if (!missing.empty()) {
    std::ostringstream os;
    for (size_t i = 0; i < missing.size(); ++i) os << (i ? ", " : "") << missing[i];
    TUPE_FAIL(where << ": the saved config lacks " << missing.size() << " model key(s): " << os.str());
  }
  ModelConfig config;
  ModelConfig::fields().apply(config, model_kv, where + " [model]");
  try {
    config.validate();
  } catch (const Error& e) {
    TUPE_FAIL(where << ": saved " << e.what());
  }
  return config;
}

}  // namespace tupe::model
