#include "tools/export/hf_tupe.h"

#include <ATen/ATen.h>

#include <cmath>

#include "common/error.h"
#include "model/hf_names.h"
#include "tools/export/hf_tupe_sources.h"  // generated: kConfigurationTupePy, kModelingTupePy

namespace tupe::exporting {

checkpoint::NamedTensors to_hf_tupe_tensors(const checkpoint::NamedTensors& tupe_tensors, const std::string& where) {
  checkpoint::NamedTensors out;
  for (const auto& [name, tensor] : tupe_tensors) {
    const std::string hf = model::hf_tupe_name(name);
    TUPE_CHECK(!hf.empty(), where << ": tensor '" << name << "' has no place in the exported model");
    out.emplace_back(hf, tensor.detach().to(at::kFloat).contiguous());
  }
  return out;
}

nlohmann::json hf_tupe_config(const model::ModelOptions& c, const HeadInfo& heads) {
  using nlohmann::json;
  const bool untied = c.has_untied_positions(), relative = c.has_relative_bias();
  const bool table = c.has_position_projections();  // TUPE-A/R and BERT-A^d
  const bool cls_buckets = relative && c.untie_cls;
  const double dh = static_cast<double>(c.head_size());
  json cfg = {
      {"architectures", {heads.num_labels > 0 ? "TupeForSequenceClassification" : "TupeForMaskedLM"}},
      {"model_type", "tupe"},
      {"auto_map",
       {{"AutoConfig", "configuration_tupe.TupeConfig"},
        {"AutoModel", "modeling_tupe.TupeModel"},
        {"AutoModelForMaskedLM", "modeling_tupe.TupeForMaskedLM"},
        {"AutoModelForSequenceClassification", "modeling_tupe.TupeForSequenceClassification"}}},
      {"vocab_size", c.vocab_size},
      {"hidden_size", c.hidden_size},
      {"num_hidden_layers", c.num_layers},
      {"num_attention_heads", c.num_heads},
      {"intermediate_size", c.ffn_size},
      {"hidden_act", "gelu"},  // erf GELU (model/encoder.h)
      {"hidden_dropout_prob", c.hidden_dropout},
      {"attention_probs_dropout_prob", c.attention_dropout},
      {"max_position_embeddings", c.max_positions},
      {"type_vocab_size", c.type_vocab_size},
      // Without a segment embedding token_type_ids are accepted and ignored (as RoBERTa's one row of zeros does).
      {"ignores_token_type_ids", c.type_vocab_size == 0},
      {"initializer_range", c.init_std},
      {"layer_norm_eps", c.layer_norm_eps},
      {"position_encoding", model::to_string(c.position_encoding)},
      {"layer_norm_placement", c.layer_norm == model::LayerNormPlacement::kPost ? "post" : "pre"},
      {"untie_cls", c.untie_cls},
      // alpha = q k^T * word_term_scale + reset_theta(P + B), P scaled by positional_term_scale, B unscaled;
      // BERT-A^d: q, k include the projected positions, word_term_scale = 1/sqrt(4 d_h), no P
      // RoPE (q, k turned by position), ALiBi (-m_h |i - j| in the logits), NoPE: 1/sqrt(d_h), no P, no table
      {"word_term_scale", c.attention_scale()},
      {"positional_term_scale", untied ? json(1.0 / std::sqrt(2.0 * dh)) : json(nullptr)},
      {"position_table_size", table ? c.position_table_rows() : 0},
      {"relative_bucket_function", "t5-bidirectional"},
      {"relative_buckets", c.relative_buckets},
      {"relative_max_distance", c.relative_max_distance},
      {"relative_bias_rows", relative ? c.relative_buckets + 1 : 0},
      {"cls_row_bucket", cls_buckets ? json(c.relative_buckets / 2) : json(nullptr)},
      {"cls_column_bucket", cls_buckets ? json(c.relative_buckets) : json(nullptr)},
      {"rope_base", c.rope_base},  // rope only: theta_i = rope_base^(-2i/d_h)
      {"pad_token_id", 0},
      {"tie_word_embeddings", true},
      {"dtype", "float32"},
  };
  if (heads.num_labels > 0) {
    cfg["num_labels"] = heads.num_labels;
    cfg["problem_type"] = heads.num_labels == 1 ? "regression" : "single_label_classification";
    if (!heads.task.empty()) cfg["finetuning_task"] = heads.task;
    if (static_cast<int64_t>(heads.labels.size()) == heads.num_labels) {
      json id2label = json::object(), label2id = json::object();
      for (size_t i = 0; i < heads.labels.size(); ++i) {
        id2label[std::to_string(i)] = heads.labels[i];
        label2id[heads.labels[i]] = static_cast<int64_t>(i);
      }
      cfg["id2label"] = id2label;
      cfg["label2id"] = label2id;
    }
  }
  return cfg;
}

const std::vector<std::pair<std::string, std::string>>& hf_tupe_sources() {
  static const std::vector<std::pair<std::string, std::string>> files = {
      {"configuration_tupe.py", kConfigurationTupePy}, {"modeling_tupe.py", kModelingTupePy}};
  return files;
}

}  // namespace tupe::exporting
