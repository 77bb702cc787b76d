// The checkpoint layout (named_parameters: names, order, shapes) of TUPE-BERT, written out
// by hand from the names in model/tupe_bert.h, so that internal changes (e.g. the fused
// Q/K/V projection of model/attention.cpp) cannot rename, reorder or reshape a tensor that
// saved checkpoints and the HF export rely on.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "model/tupe_bert.h"
#include "model_test_util.h"

namespace {

using tupe::model::LayerNormPlacement;
using tupe::model::PositionEncoding;
using tupe::model::TupeBert;
using Layout = std::vector<std::pair<std::string, std::vector<int64_t>>>;

Layout layout_of(torch::nn::Module& m) {
  Layout out;
  for (const auto& p : m.named_parameters()) out.emplace_back(p.key(), p.value().sizes().vec());
  return out;
}

// Entry-by-entry comparison (gtest prints only the start of long vectors).
void expect_layout(const Layout& got, const Layout& want) {
  for (size_t i = 0; i < std::max(got.size(), want.size()); ++i) {
    const std::string g = i < got.size() ? got[i].first + " " + c10::str(at::IntArrayRef(got[i].second)) : "(none)";
    const std::string w = i < want.size() ? want[i].first + " " + c10::str(at::IntArrayRef(want[i].second)) : "(none)";
    EXPECT_EQ(g, w) << "parameter #" << i;
  }
}

// One encoder layer's tensors at width d, FFN width F (post- or pre-LN: same names).
void add_layer(Layout& l, int i, int64_t d, int64_t F) {
  const std::string p = "encoder.layers." + std::to_string(i) + ".";
  for (const char* lin : {"query", "key", "value", "output"}) {
    l.push_back({p + "attention." + lin + ".weight", {d, d}});
    l.push_back({p + "attention." + lin + ".bias", {d}});
  }
  l.push_back({p + "attention_norm.weight", {d}});
  l.push_back({p + "attention_norm.bias", {d}});
  l.push_back({p + "ffn_in.weight", {F, d}});
  l.push_back({p + "ffn_in.bias", {F}});
  l.push_back({p + "ffn_out.weight", {d, F}});
  l.push_back({p + "ffn_out.bias", {d}});
  l.push_back({p + "ffn_norm.weight", {d}});
  l.push_back({p + "ffn_norm.bias", {d}});
}

TEST(ParameterLayout, TupeRelativeUntiedWithSegmentsAndSentenceHead) {
  auto cfg = tupe::model::testing::small_config(PositionEncoding::kTupeRelative, true);  // d 16, H 4, F 32, V 50
  cfg.type_vocab_size = 2;
  TupeBert net(cfg, /*num_labels=*/3);
  Layout want = {{"encoder.embeddings.word.weight", {50, 16}},
                 {"encoder.embeddings.segment.weight", {2, 16}},
                 {"encoder.embeddings.norm.weight", {16}},
                 {"encoder.embeddings.norm.bias", {16}},
                 {"encoder.positional.table.weight", {41, 16}},  // max_positions 40 + 1 ([CLS] untie)
                 {"encoder.positional.norm.weight", {16}},
                 {"encoder.positional.norm.bias", {16}},
                 {"encoder.positional.query.weight", {16, 16}},
                 {"encoder.positional.query.bias", {16}},
                 {"encoder.positional.key.weight", {16, 16}},
                 {"encoder.positional.key.bias", {16}},
                 {"encoder.positional.relative_bias.weight", {33, 4}}};
  add_layer(want, 0, 16, 32);
  add_layer(want, 1, 16, 32);
  // A module's own parameters come before its submodules' (mlm_head.bias first).
  Layout heads = {{"mlm_head.bias", {50}},             {"mlm_head.dense.weight", {16, 16}},
                  {"mlm_head.dense.bias", {16}},       {"mlm_head.norm.weight", {16}},
                  {"mlm_head.norm.bias", {16}},        {"sentence_head.dense.weight", {16, 16}},
                  {"sentence_head.dense.bias", {16}},  {"sentence_head.out.weight", {3, 16}},
                  {"sentence_head.out.bias", {3}}};
  want.insert(want.end(), heads.begin(), heads.end());
  expect_layout(layout_of(*net), want);
  EXPECT_TRUE(net->named_buffers().is_empty()) << "a registered buffer would enter checkpoints";
}

TEST(ParameterLayout, BertAbsolutePreLn) {
  auto cfg = tupe::model::testing::small_config(PositionEncoding::kBertAbsolute, false, /*d=*/8, /*H=*/2);
  cfg.layer_norm = LayerNormPlacement::kPre;
  TupeBert net(cfg);
  Layout want = {{"encoder.embeddings.word.weight", {50, 8}},
                 {"encoder.embeddings.position.weight", {40, 8}},
                 {"encoder.embeddings.norm.weight", {8}},
                 {"encoder.embeddings.norm.bias", {8}}};
  add_layer(want, 0, 8, 16);
  add_layer(want, 1, 8, 16);
  Layout tail = {{"encoder.final_norm.weight", {8}}, {"encoder.final_norm.bias", {8}},
                 {"mlm_head.bias", {50}},            {"mlm_head.dense.weight", {8, 8}},
                 {"mlm_head.dense.bias", {8}},       {"mlm_head.norm.weight", {8}},
                 {"mlm_head.norm.bias", {8}}};
  want.insert(want.end(), tail.begin(), tail.end());
  expect_layout(layout_of(*net), want);
}

}  // namespace
