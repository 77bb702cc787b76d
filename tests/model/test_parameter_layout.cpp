// The checkpoint layout (named_parameters: names, order, shapes) of TUPE-BERT, written out
// by hand from the names in model/tupe_bert.h, so that internal changes (e.g. the fused
// Q/K/V projection of model/attention.cpp) cannot rename, reorder or reshape a tensor that
// saved checkpoints and the HF export rely on. And TUPE-R under bf16 autocast against fp32:
// the attention bias is built once in the compute dtype and shared by every layer.
#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/function.h>

#include <algorithm>
#include <random>
#include <set>
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

// Every autograd node reachable from `root`.
// (Raw pointers: grad_fn() is a shared_ptr in older LibTorch, an intrusive_ptr in newer.)
std::vector<torch::autograd::Node*> graph_nodes(torch::autograd::Node* root) {
  std::vector<torch::autograd::Node*> order, stack{root};
  std::set<torch::autograd::Node*> seen{root};
  while (!stack.empty()) {
    torch::autograd::Node* n = stack.back();
    stack.pop_back();
    order.push_back(n);
    for (const auto& e : n->next_edges())
      if (e.function && seen.insert(e.function.get()).second) stack.push_back(e.function.get());
  }
  return order;
}

class ScopedCpuBf16Autocast {
 public:
  ScopedCpuBf16Autocast() {
    at::autocast::set_autocast_dtype(at::kCPU, at::kBFloat16);
    at::autocast::set_autocast_enabled(at::kCPU, true);
  }
  ~ScopedCpuBf16Autocast() {
    at::autocast::set_autocast_enabled(at::kCPU, false);
    at::autocast::clear_cache();
  }
};

double relative_l2(const at::Tensor& got, const at::Tensor& ref) {
  const at::Tensor a = got.to(at::kDouble), b = ref.to(at::kDouble);
  return ((a - b).norm() / b.norm()).item<double>();
}

// TUPE-R, padded batch, training mode (the CPU explicit-attention path: the bias needs a
// gradient) and eval mode (SDPA). Under bf16 autocast: the encoder output within 1.5e-2
// relative L2 of the fp32 forward (bf16 keeps 8 significant bits, 2^-9 = 2e-3 relative per
// rounding, a few roundings deep; measured ~5e-3), the shared bias is bf16 and consumed
// directly by every layer (no cast node per layer), and the positional parameters' gradients
// within 3e-2 relative L2 of fp32 (measured ~1e-2: the layers' bias gradients are also
// summed in bf16 before the one cast back).
TEST(ParameterLayout, TupeRelativeBf16AutocastMatchesFp32) {
  const uint64_t seed = tupe::model::testing::test_seed();
  SCOPED_TRACE(tupe::model::testing::seed_text(seed));
  at::manual_seed(seed);
  auto cfg = tupe::model::testing::small_config(PositionEncoding::kTupeRelative, true, /*d=*/64, /*H=*/4);
  cfg.num_layers = 3;
  tupe::model::Encoder enc(cfg);
  tupe::model::testing::randomize(*enc, 0.1);
  {
    torch::NoGradGuard g;  // LayerNorms near identity, as trained models have
    for (auto& p : enc->named_parameters())
      if (p.key().find("norm.weight") != std::string::npos) p.value().add_(1.0);
  }
  const int64_t B = 3, L = 24;
  at::Tensor ids = at::randint(cfg.vocab_size, {B, L}, at::kLong);
  at::Tensor mask = at::ones({B, L}, at::kLong);
  mask.select(0, 2).narrow(0, L - 6, 6).fill_(0);
  at::Tensor w = at::randn({B, L, cfg.hidden_size});
  const std::vector<std::string> positional = {"positional.table.weight", "positional.query.weight", "positional.key.weight",
                                               "positional.relative_bias.weight"};
  for (bool training : {true, false}) {
    SCOPED_TRACE(training ? "train" : "eval");
    training ? enc->train() : enc->eval();
    auto run = [&](bool autocast, std::vector<at::Tensor>& grads) -> at::Tensor {
      enc->zero_grad();
      tupe::model::EncoderOutput out;
      {
        std::unique_ptr<ScopedCpuBf16Autocast> scope;
        if (autocast) scope = std::make_unique<ScopedCpuBf16Autocast>();
        out = enc->forward(ids, mask);
      }
      EXPECT_EQ(out.attention_bias.scalar_type(), autocast ? at::kBFloat16 : at::kFloat);
      EXPECT_EQ(out.attention_bias.sizes(), (std::vector<int64_t>{B, cfg.num_heads, L, L}));
      if (autocast) {  // each layer consumes the one shared bias itself, not a cast of it
        int consumers = 0;
        torch::autograd::Node* bias_node = out.attention_bias.grad_fn().get();
        EXPECT_NE(bias_node, nullptr) << "the shared bias is not in the graph";
        for (auto* n : graph_nodes(out.hidden.grad_fn().get())) {
          bool uses = false;
          for (const auto& e : n->next_edges()) uses = uses || e.function.get() == bias_node;
          if (!uses) continue;
          ++consumers;
          EXPECT_EQ(n->name().find("ToCopy"), std::string::npos) << n->name() << " casts the shared bias again";
        }
        EXPECT_EQ(consumers, cfg.num_layers);
      }
      at::Tensor h = out.hidden.to(at::kFloat);
      (h.masked_fill(mask.unsqueeze(-1) == 0, 0.0) * w).sum().backward();
      grads.clear();
      auto named = enc->named_parameters();
      for (const auto& n : positional) grads.push_back(named[n].grad().clone());
      return h.detach().masked_fill(mask.unsqueeze(-1) == 0, 0.0);
    };
    std::vector<at::Tensor> g32, g16;
    const at::Tensor ref = run(false, g32);
    const at::Tensor low = run(true, g16);
    const double err = relative_l2(low, ref);
    EXPECT_LT(err, 1.5e-2);
    EXPECT_GT(err, 0.0) << "bf16 identical to fp32: autocast not active";
    for (size_t i = 0; i < positional.size(); ++i) EXPECT_LT(relative_l2(g16[i], g32[i]), 3e-2) << positional[i];
  }
}

}  // namespace
