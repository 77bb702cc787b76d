#include "model/hf_names.h"

#include <regex>
#include <utility>
#include <vector>

namespace tupe::model {

std::string hf_bert_refusal(const ModelOptions& config) {
  if (config.has_positional_query_key())
    return "BertModel has no " + to_string(config.position_encoding) +
           " attention (BERT-A^d: the position table's own projections U^Q, U^K added to every layer's query and key)";
  if (config.position_encoding != PositionEncoding::kBertAbsolute)
    return "BertModel has no " + to_string(config.position_encoding) +
           " attention (neither TUPE's untied positional term nor a relative bias in its logits)";
  if (config.layer_norm != LayerNormPlacement::kPost)
    return "BertModel is post-LN; this checkpoint is pre-LN (model.layer_norm = pre)";
  return "";
}

std::string hf_bert_name(const std::string& n) {
  static const std::vector<std::pair<std::string, std::string>> fixed = {
      {"encoder.embeddings.word.weight", "bert.embeddings.word_embeddings.weight"},
      {"encoder.embeddings.position.weight", "bert.embeddings.position_embeddings.weight"},
      {"encoder.embeddings.segment.weight", "bert.embeddings.token_type_embeddings.weight"},
      {"encoder.embeddings.norm.weight", "bert.embeddings.LayerNorm.weight"},
      {"encoder.embeddings.norm.bias", "bert.embeddings.LayerNorm.bias"},
      {"mlm_head.dense.weight", "cls.predictions.transform.dense.weight"},
      {"mlm_head.dense.bias", "cls.predictions.transform.dense.bias"},
      {"mlm_head.norm.weight", "cls.predictions.transform.LayerNorm.weight"},
      {"mlm_head.norm.bias", "cls.predictions.transform.LayerNorm.bias"},
      {"mlm_head.bias", "cls.predictions.bias"},
      {"sentence_head.dense.weight", "bert.pooler.dense.weight"},
      {"sentence_head.dense.bias", "bert.pooler.dense.bias"},
      {"sentence_head.out.weight", "classifier.weight"},
      {"sentence_head.out.bias", "classifier.bias"},
  };
  for (const auto& [from, to] : fixed)
    if (n == from) return to;
  static const std::regex layer(R"(encoder\.layers\.(\d+)\.(.+)\.(weight|bias))");
  std::smatch m;
  if (!std::regex_match(n, m, layer)) return "";
  static const std::vector<std::pair<std::string, std::string>> modules = {
      {"attention.query", "attention.self.query"},     {"attention.key", "attention.self.key"},
      {"attention.value", "attention.self.value"},     {"attention.output", "attention.output.dense"},
      {"attention_norm", "attention.output.LayerNorm"}, {"ffn_in", "intermediate.dense"},
      {"ffn_out", "output.dense"},                     {"ffn_norm", "output.LayerNorm"},
  };
  for (const auto& [from, to] : modules)
    if (m[2] == from) return "bert.encoder.layer." + m[1].str() + "." + to + "." + m[3].str();
  return "";
}

std::string hf_tupe_name(const std::string& n) {
  static const std::vector<std::pair<std::string, std::string>> prefixes = {
      {"encoder.", "tupe."}, {"mlm_head.", "lm_head."}, {"sentence_head.", "classifier."}};
  for (const auto& [from, to] : prefixes)
    if (n.rfind(from, 0) == 0) return to + n.substr(from.size());
  return "";
}

}  // namespace tupe::model
