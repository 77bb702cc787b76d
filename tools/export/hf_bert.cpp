#include "tools/export/hf_bert.h"

#include <ATen/ATen.h>

#include <set>

#include "common/error.h"
#include "model/hf_names.h"

namespace tupe::exporting {

checkpoint::NamedTensors to_hf_bert_tensors(const checkpoint::NamedTensors& tupe_tensors,
                                            const model::ModelOptions& config, const std::string& where) {
  const std::string refusal = model::hf_bert_refusal(config);
  TUPE_CHECK(refusal.empty(), where << ": cannot export to HuggingFace BertForMaskedLM: " << refusal);
  checkpoint::NamedTensors out;
  std::set<std::string> seen;
  for (const auto& [name, tensor] : tupe_tensors) {
    const std::string hf = model::hf_bert_name(name);
    TUPE_CHECK(!hf.empty(), where << ": tensor '" << name << "' has no place in BertForMaskedLM");
    out.emplace_back(hf, tensor.detach().to(at::kFloat).contiguous());
    seen.insert(name);
  }
  const bool classifier = seen.count("sentence_head.out.weight") > 0;
  std::vector<std::string> required = {"encoder.embeddings.word.weight", "encoder.embeddings.position.weight",
                                       "encoder.embeddings.norm.weight"};
  for (const char* head : {"mlm_head.dense.weight", "mlm_head.bias"})
    if (!classifier) required.emplace_back(head);
  if (classifier) required.emplace_back("sentence_head.dense.weight");
  for (const auto& name : required) TUPE_CHECK(seen.count(name), where << ": tensor '" << name << "' is missing");
  if (!seen.count("encoder.embeddings.segment.weight")) {
    // BertModel always adds a token-type embedding: two zero rows add nothing to either
    // sentence of a pair, so the token_type_ids a BERT tokenizer gives are ignored.
    out.emplace_back("bert.embeddings.token_type_embeddings.weight", at::zeros({2, config.hidden_size}, at::kFloat));
  }
  return out;
}

nlohmann::json hf_bert_config(const model::ModelOptions& c, int64_t num_labels,
                              const std::vector<std::string>& labels) {
  nlohmann::json cfg = {
      {"architectures", {num_labels > 0 ? "BertForSequenceClassification" : "BertForMaskedLM"}},
      {"model_type", "bert"},
      {"vocab_size", c.vocab_size},
      {"hidden_size", c.hidden_size},
      {"num_hidden_layers", c.num_layers},
      {"num_attention_heads", c.num_heads},
      {"intermediate_size", c.ffn_size},
      {"hidden_act", "gelu"},  // erf GELU, as model/encoder.h
      {"hidden_dropout_prob", c.hidden_dropout},
      {"attention_probs_dropout_prob", c.attention_dropout},
      {"max_position_embeddings", c.max_positions},
      {"type_vocab_size", c.type_vocab_size > 0 ? c.type_vocab_size : 2},
      {"initializer_range", c.init_std},
      {"layer_norm_eps", c.layer_norm_eps},
      {"pad_token_id", 0},
      {"position_embedding_type", "absolute"},
      {"tie_word_embeddings", true},
      {"dtype", "float32"},
  };
  if (num_labels > 0) {
    cfg["num_labels"] = num_labels;
    cfg["problem_type"] = num_labels == 1 ? "regression" : "single_label_classification";
    if (static_cast<int64_t>(labels.size()) == num_labels) {
      nlohmann::json id2label = nlohmann::json::object(), label2id = nlohmann::json::object();
      for (size_t i = 0; i < labels.size(); ++i) {
        id2label[std::to_string(i)] = labels[i];
        label2id[labels[i]] = static_cast<int64_t>(i);
      }
      cfg["id2label"] = id2label;
      cfg["label2id"] = label2id;
    }
  }
  return cfg;
}

}  // namespace tupe::exporting
