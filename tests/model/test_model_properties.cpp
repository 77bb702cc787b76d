// Properties of the whole model: parameter counts at BERT-Base sizes checked against
// docs/model.md "Sizes", padding invariance, bf16 autocast vs fp32, finite-difference gradients.
#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <gtest/gtest.h>

#include <random>

#include "common/error.h"
#include "model/tupe_bert.h"
#include "model_test_util.h"

namespace {

using tupe::model::ModelOptions;
using tupe::model::PositionEncoding;
using tupe::model::TupeBert;

ModelOptions base(PositionEncoding pe, bool untie) {
  ModelOptions c;  // defaults are BERT-Base: 12 layers, d 768, 12 heads, FFN 3072, 512 positions
  c.vocab_size = 30522;  // BERT's WordPiece (the default, 0, is the shards' size in pre-training)
  c.position_encoding = pe;
  c.untie_cls = untie;
  return c;
}

int64_t params_of(const ModelOptions& c) {
  TupeBert m(c);
  return tupe::model::count_parameters(*m);
}

TEST(ParameterCounts, TupeMinusBertAtBaseSizes) {
  const ModelOptions c = base(PositionEncoding::kBertAbsolute, false);
  const int64_t d = c.hidden_size, H = c.num_heads;
  // docs/model.md: U^Q and U^K with biases, 2 (d^2 + d) = 1,181,184, plus the position LN (2 d = 1,536).
  const int64_t projections = 2 * (d * d + d), position_ln = 2 * d;
  EXPECT_EQ(projections, 1181184);
  EXPECT_EQ(position_ln, 1536);
  const int64_t bert_a = params_of(c);
  // With [CLS] tied, TUPE-A's table has as many rows as BERT-A's: the difference is exactly
  // the figure of docs/model.md.
  EXPECT_EQ(params_of(base(PositionEncoding::kTupeAbsolute, false)) - bert_a, projections + position_ln);
  // The [CLS] untie adds one table row (p_theta1 / p_theta2 take rows 0 and 1).
  EXPECT_EQ(params_of(base(PositionEncoding::kTupeAbsolute, true)) - bert_a, projections + position_ln + d);
  // TUPE-R adds the (32 + 1) x H relative table (396 at H = 12).
  const int64_t rel = (c.relative_buckets + 1) * H;
  EXPECT_EQ(rel, 396);
  EXPECT_EQ(params_of(base(PositionEncoding::kTupeRelative, true)) - params_of(base(PositionEncoding::kTupeAbsolute, true)),
            rel);
  EXPECT_EQ(params_of(base(PositionEncoding::kBertRelative, false)) - bert_a, rel);
  // BERT-A^d: the input position table (L_max x d) becomes the position table of U^Q, U^K
  // (the same rows); it adds the projections and the position LN: TUPE-A's count, [CLS] tied.
  const int64_t bert_ad = params_of(base(PositionEncoding::kBertAbsoluteUntied, false));
  EXPECT_EQ(bert_ad - bert_a, projections + position_ln);
  EXPECT_EQ(bert_ad, params_of(base(PositionEncoding::kTupeAbsolute, false)));
  EXPECT_EQ(bert_a, 109512762);  // docs/model.md "Sizes"
  EXPECT_EQ(bert_ad, 110695482);  // 109,512,762 + 1,181,184 + 1,536
  // RoPE, ALiBi and NoPE have no position parameters at all: BERT-A less its 512 x d table.
  for (auto pe : {PositionEncoding::kRotary, PositionEncoding::kAlibi, PositionEncoding::kNone})
    EXPECT_EQ(params_of(base(pe, false)), bert_a - c.max_positions * d) << tupe::model::to_string(pe);
  EXPECT_EQ(bert_a - c.max_positions * d, 109119546);  // docs/model.md "Sizes"
  // BERT-A itself: embeddings (V + 512) d + LN, 12 layers of 4 (d^2 + d) + 2 (d F) + F + d + 4 d,
  // MLM head d^2 + d + 2 d + V (decoder tied).
  const int64_t V = c.vocab_size, F = c.ffn_size, L = c.max_positions;
  const int64_t layer = 4 * (d * d + d) + (d * F + F) + (F * d + d) + 4 * d;
  EXPECT_EQ(bert_a, (V + L) * d + 2 * d + 12 * layer + (d * d + d) + 2 * d + V);
}

TEST(Model, PaddingDoesNotChangeRealPositions) {
  for (auto pe : {PositionEncoding::kBertAbsolute, PositionEncoding::kTupeRelative, PositionEncoding::kTupeAbsolute,
                  PositionEncoding::kBertAbsoluteUntied, PositionEncoding::kRotary, PositionEncoding::kAlibi,
                  PositionEncoding::kNone}) {
    const uint64_t seed = tupe::model::testing::test_seed();
    SCOPED_TRACE(tupe::model::testing::seed_text(seed));
    at::manual_seed(seed);
    auto cfg = tupe::model::testing::small_config(
        pe, pe == PositionEncoding::kTupeRelative || pe == PositionEncoding::kTupeAbsolute);
    tupe::model::Encoder enc(cfg);
    tupe::model::testing::randomize(*enc, 0.3);
    enc->eval();
    at::Tensor real = at::randint(cfg.vocab_size, {1, 7}, at::kLong);
    at::Tensor alone = enc->forward(real, at::ones({1, 7}, at::kLong)).hidden;
    // Same sequence padded to 12 with arbitrary ids at the padded positions.
    at::Tensor padded = at::cat({real, at::randint(cfg.vocab_size, {1, 5}, at::kLong)}, 1);
    at::Tensor mask = at::cat({at::ones({1, 7}, at::kLong), at::zeros({1, 5}, at::kLong)}, 1);
    at::Tensor with_pad = enc->forward(padded, mask).hidden.narrow(1, 0, 7);
    EXPECT_LT((alone - with_pad).abs().max().item<double>(), 1e-5) << tupe::model::to_string(pe);
  }
}

TEST(Model, Bf16AutocastOnCpuWithinOnePercentOfFp32) {
  const uint64_t seed = tupe::model::testing::test_seed();
  SCOPED_TRACE(tupe::model::testing::seed_text(seed));
  at::manual_seed(seed);
  auto cfg = tupe::model::testing::small_config(PositionEncoding::kTupeRelative, true, 64, 4);
  TupeBert net(cfg);
  net->eval();
  at::Tensor ids = at::randint(cfg.vocab_size, {4, 24}, at::kLong);
  at::Tensor mask = at::ones({4, 24}, at::kLong);
  mask.select(0, 3).narrow(0, 20, 4).fill_(0);
  at::Tensor pos = at::arange(0, 4 * 24, 5, at::kLong);
  at::Tensor ref = net->mlm_logits(ids, mask, {}, pos);
  at::autocast::set_autocast_dtype(at::kCPU, at::kBFloat16);
  at::autocast::set_autocast_enabled(at::kCPU, true);
  at::Tensor low = net->mlm_logits(ids, mask, {}, pos);
  at::autocast::set_autocast_enabled(at::kCPU, false);
  at::autocast::clear_cache();
  EXPECT_EQ(low.scalar_type(), at::kBFloat16) << "autocast did not run the head in bf16";
  const double rel = ((low.to(at::kFloat) - ref).norm() / ref.norm()).item<double>();
  EXPECT_LT(rel, 1e-2);
  EXPECT_GT(rel, 0.0) << "bf16 path identical to fp32: autocast not active";
}

TEST(Model, FiniteDifferenceGradients) {
  for (auto pe : {PositionEncoding::kTupeRelative, PositionEncoding::kBertRelative, PositionEncoding::kBertAbsoluteUntied,
                  PositionEncoding::kRotary, PositionEncoding::kAlibi}) {
    const uint64_t seed = tupe::model::testing::test_seed();
    SCOPED_TRACE(tupe::model::testing::seed_text(seed));
    at::manual_seed(seed);
    auto cfg = tupe::model::testing::small_config(
        pe, pe == PositionEncoding::kTupeRelative || pe == PositionEncoding::kBertRelative, 8, 2);
    cfg.vocab_size = 20;
    cfg.ffn_size = 12;
    TupeBert net(cfg, /*num_labels=*/3);
    net->to(at::kDouble);
    tupe::model::testing::randomize(*net, 0.4);
    net->eval();
    at::Tensor ids = at::randint(cfg.vocab_size, {2, 6}, at::kLong);
    at::Tensor mask = at::ones({2, 6}, at::kLong);
    mask[1][5] = 0;
    at::Tensor pos = at::tensor({1, 3, 7, 10}, at::kLong);
    at::Tensor w_mlm = at::randn({4, cfg.vocab_size}, at::kDouble), w_cls = at::randn({2, 3}, at::kDouble);
    auto loss_fn = [&] {
      return (net->mlm_logits(ids, mask, {}, pos) * w_mlm).sum() + (net->sentence_logits(ids, mask, {}) * w_cls).sum();
    };
    net->zero_grad();
    loss_fn().backward();
    torch::NoGradGuard g;
    std::mt19937_64 rng(seed);
    for (auto& item : net->named_parameters()) {
      at::Tensor p = item.value();
      at::Tensor flat = p.view({-1});
      at::Tensor grad = p.grad().view({-1});
      for (int k = 0; k < 3; ++k) {
        const int64_t idx = static_cast<int64_t>(rng() % static_cast<uint64_t>(flat.numel()));
        const double orig = flat[idx].item<double>(), eps = 1e-6;
        flat[idx] = orig + eps;
        const double up = loss_fn().item<double>();
        flat[idx] = orig - eps;
        const double down = loss_fn().item<double>();
        flat[idx] = orig;
        const double numeric = (up - down) / (2 * eps), analytic = grad[idx].item<double>();
        EXPECT_NEAR(analytic, numeric, 1e-6 * std::max(1.0, std::fabs(numeric)))
            << item.key() << "[" << idx << "] " << tupe::model::to_string(pe);
      }
    }
  }
}

TEST(ModelOptions, ValidateNamesTheKey) {
  auto c = tupe::model::testing::small_config(PositionEncoding::kBertAbsolute, true);
  try {
    c.validate();
    FAIL() << "untie_cls with bert-absolute accepted";
  } catch (const tupe::Error& e) {
    EXPECT_NE(std::string(e.what()).find("model.untie_cls"), std::string::npos) << e.what();
  }
  c.untie_cls = false;
  c.num_heads = 5;
  EXPECT_THROW(c.validate(), tupe::Error);
}

TEST(Model, SequenceLongerThanMaxPositionsIsAnError) {
  auto cfg = tupe::model::testing::small_config(PositionEncoding::kTupeRelative, true);
  tupe::model::Encoder enc(cfg);
  at::Tensor ids = at::zeros({1, cfg.max_positions + 1}, at::kLong);
  EXPECT_THROW(enc->forward(ids), tupe::Error);
}

}  // namespace
