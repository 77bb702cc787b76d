// BERT-A (with segment embeddings) equals HuggingFace `transformers` BertModel loaded with
// the same weights: max abs difference of the last hidden states < 1e-5 in fp32.
// The reference file is made in the same CTest run by hf_bert_reference.py (fixture).
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdlib>

#include "checkpoint/named_tensors.h"
#include "checkpoint/safetensors.h"
#include "model/encoder.h"

namespace {

TEST(HfParity, BertAbsoluteMatchesTransformersBertModel) {
  const char* path = std::getenv("TUPE_HF_BERT_REFERENCE");
  ASSERT_NE(path, nullptr) << "TUPE_HF_BERT_REFERENCE not set (the CTest fixture writes it)";
  auto file = tupe::checkpoint::read_safetensors(path);
  const auto cfg_json = nlohmann::json::parse(file.metadata.at("config"));
  tupe::model::ModelOptions c;
  c.vocab_size = cfg_json["vocab_size"];
  c.hidden_size = cfg_json["hidden_size"];
  c.num_layers = cfg_json["num_layers"];
  c.num_heads = cfg_json["num_heads"];
  c.ffn_size = cfg_json["ffn_size"];
  c.max_positions = cfg_json["max_positions"];
  c.type_vocab_size = cfg_json["type_vocab_size"];
  c.layer_norm_eps = cfg_json["layer_norm_eps"];
  c.hidden_dropout = c.attention_dropout = 0.0;
  c.position_encoding = tupe::model::PositionEncoding::kBertAbsolute;
  c.untie_cls = false;
  tupe::model::Encoder enc(c);
  enc->eval();

  tupe::checkpoint::NamedTensors weights, params;
  for (auto& [name, t] : file.tensors)
    if (name.rfind("input.", 0) != 0 && name.rfind("expected.", 0) != 0) weights.emplace_back(name, t);
  for (auto& item : enc->named_parameters()) params.emplace_back(item.key(), item.value());
  tupe::checkpoint::copy_named_tensors(params, weights, path);  // strict: names and shapes

  const auto get = [&](const std::string& n) { return tupe::checkpoint::find_tensor(file.tensors, n); };
  at::Tensor hidden = enc->forward(get("input.input_ids"), get("input.attention_mask"), get("input.segment_ids")).hidden;
  at::Tensor expected = get("expected.hidden");
  ASSERT_EQ(hidden.sizes(), expected.sizes());
  const double max_diff = (hidden - expected).abs().max().item<double>();
  EXPECT_LT(max_diff, 1e-5);
  EXPECT_GT(expected.abs().max().item<double>(), 0.1) << "degenerate reference";
}

}  // namespace
