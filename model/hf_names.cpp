#include "model/hf_names.h"

#include <regex>
#include <utility>
#include <vector>

namespace tupe::model {

std::string hf_bert_refusal(const ModelOptions& config) {
  if (config.has_positional_query_key())
    return "BertModel has no " + to_string(config.position_encoding) +
           " attention (BERT-A^d: the position table's own projections U^Q, U^K added to every layer's query and key)";
  if (config.has_rotary() || config.has_alibi() || config.position_encoding == PositionEncoding::kNone)
    return "BertModel has no " + to_string(config.position_encoding) +
           " positions (it adds a learned absolute table to its input; this model has none)";
  if (config.position_encoding != PositionEncoding::kBertAbsolute)
    return "BertModel has no " + to_string(config.position_encoding) +
           " attention (neither TUPE's untied positional term nor a relative bias in its logits)";
  if (config.layer_norm != LayerNormPlacement::kPost)
    return "BertModel is post-LN; this checkpoint is pre-LN (model.layer_norm = pre)";
  return "";
}

namespace {

/// The fixed names: (tupe, transformers) pairs, used in both directions.
const std::vector<std::pair<std::string, std::string>>& fixed_bert_names() {
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
  return fixed;
}

/// The per-layer modules: (tupe, transformers) under encoder.layers.<i>. / bert.encoder.layer.<i>.
const std::vector<std::pair<std::string, std::string>>& layer_modules() {
  static const std::vector<std::pair<std::string, std::string>> modules = {
      {"attention.query", "attention.self.query"},     {"attention.key", "attention.self.key"},
      {"attention.value", "attention.self.value"},     {"attention.output", "attention.output.dense"},
      {"attention_norm", "attention.output.LayerNorm"}, {"ffn_in", "intermediate.dense"},
      {"ffn_out", "output.dense"},                     {"ffn_norm", "output.LayerNorm"},
  };
  return modules;
}

/// Which side of the (tupe, transformers) pairs a name is on.
enum class Side { kTupe, kHf };

const std::string& on(const std::pair<std::string, std::string>& names, Side side) {
  return side == Side::kTupe ? names.first : names.second;
}

/// `n` translated from `from` to the other side through the two tables above; "" when it has no place.
std::string translate(const std::string& n, Side from) {
  const Side to = from == Side::kTupe ? Side::kHf : Side::kTupe;
  for (const auto& names : fixed_bert_names())
    if (n == on(names, from)) return on(names, to);
  static const std::regex tupe_layer(R"(encoder\.layers\.(\d+)\.(.+)\.(weight|bias))");
  static const std::regex hf_layer(R"(bert\.encoder\.layer\.(\d+)\.(.+)\.(weight|bias))");
  std::smatch m;
  if (!std::regex_match(n, m, from == Side::kTupe ? tupe_layer : hf_layer)) return "";
  const std::string prefix = to == Side::kTupe ? "encoder.layers." : "bert.encoder.layer.";
  for (const auto& names : layer_modules())
    if (m[2] == on(names, from)) return prefix + m[1].str() + "." + on(names, to) + "." + m[3].str();
  return "";
}

}  // namespace

std::string hf_bert_name(const std::string& n) { return translate(n, Side::kTupe); }

std::string tupe_name_from_hf_bert(const std::string& hf_name) {
  std::string n = hf_name;
  // LayerNorm.gamma / .beta: the names of checkpoints from before transformers' rename.
  for (const auto& [old_leaf, leaf] : {std::pair<std::string, std::string>{"LayerNorm.gamma", "LayerNorm.weight"},
                                       {"LayerNorm.beta", "LayerNorm.bias"}})
    if (n.size() > old_leaf.size() && n.compare(n.size() - old_leaf.size(), old_leaf.size(), old_leaf) == 0)
      n = n.substr(0, n.size() - old_leaf.size()) + leaf;
  // BertModel's names are the bert.* names without the prefix.
  const bool prefixed = n.rfind("bert.", 0) == 0 || n.rfind("cls.", 0) == 0 || n.rfind("classifier.", 0) == 0;
  return translate(prefixed ? n : "bert." + n, Side::kHf);
}

std::string hf_tupe_name(const std::string& n) {
  static const std::vector<std::pair<std::string, std::string>> prefixes = {
      {"encoder.", "tupe."}, {"mlm_head.", "lm_head."}, {"sentence_head.", "classifier."}};
  for (const auto& [from, to] : prefixes)
    if (n.rfind(from, 0) == 0) return to + n.substr(from.size());
  return "";
}

}  // namespace tupe::model
