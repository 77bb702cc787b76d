#include "model/tupe_bert.h"

#include <ATen/ATen.h>
#include <map>
#include <set>

#include "common/error.h"

namespace tupe::model {

TupeBertImpl::TupeBertImpl(const ModelOptions& c, int64_t num_labels) : config(c) {
  encoder = register_module("encoder", Encoder(c));
  mlm_head = register_module("mlm_head", MlmHead(c, encoder->embeddings->word->weight));
  if (num_labels > 0) sentence_head = register_module("sentence_head", SentenceHead(c, num_labels));
}

at::Tensor TupeBertImpl::mlm_logits(const at::Tensor& input_ids, const at::Tensor& attention_mask,
                                    const at::Tensor& segment_ids, const at::Tensor& masked_positions) {
  at::Tensor hidden = encoder->forward(input_ids, attention_mask, segment_ids).hidden;
  return mlm_head->forward(hidden, masked_positions);
}

at::Tensor TupeBertImpl::sentence_logits(const at::Tensor& input_ids, const at::Tensor& attention_mask,
                                         const at::Tensor& segment_ids) {
  TUPE_CHECK(static_cast<bool>(sentence_head), "model: no sentence head (num_labels = 0)");
  return sentence_head->forward(encoder->forward(input_ids, attention_mask, segment_ids).hidden);
}

int64_t count_parameters(torch::nn::Module& module) {
  std::set<const void*> seen;
  int64_t n = 0;
  for (const auto& p : module.parameters())
    if (seen.insert(p.unsafeGetTensorImpl()).second) n += p.numel();
  return n;
}

std::vector<ParamGroup> parameter_table(TupeBertImpl& model) {
  std::vector<ParamGroup> rows;
  auto add = [&](const std::string& name, int64_t n) {
    for (auto& r : rows)
      if (r.name == name) return void(r.numel += n);
    rows.push_back({name, n});
  };
  std::set<const void*> seen;
  int64_t total = 0;
  for (const auto& item : model.named_parameters()) {
    if (!seen.insert(item.value().unsafeGetTensorImpl()).second) continue;
    const std::string& k = item.key();
    const int64_t n = item.value().numel();
    total += n;
    if (k.rfind("encoder.embeddings.", 0) == 0) {
      add("embeddings", n);
    } else if (k.rfind("encoder.positional.", 0) == 0) {
      add("positional term", n);
    } else if (k.rfind("encoder.layers.", 0) == 0) {
      const auto start = std::string("encoder.layers.").size();
      add("layer " + k.substr(start, k.find('.', start) - start), n);
    } else if (k.rfind("encoder.final_norm.", 0) == 0) {
      add("final LayerNorm", n);
    } else if (k.rfind("mlm_head.", 0) == 0) {
      add("MLM head (decoder tied)", n);
    } else if (k.rfind("sentence_head.", 0) == 0) {
      add("sentence head", n);
    } else {
      add("other", n);
    }
  }
  rows.push_back({"total", total});
  return rows;
}

}  // namespace tupe::model
