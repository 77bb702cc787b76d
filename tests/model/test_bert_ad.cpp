// BERT-A^d (model.position_encoding = bert-absolute-untied; docs/model.md "BERT-A^d") against
// a float64 re-implementation of the paper's formula (Sec. 4.3) written here from the paper,
// not from the model's code: the four products of every layer are computed one by one as
// L x L matrices and summed,
//   alpha_ij = 1/sqrt(4 d_h) ((x_i W^Q)(x_j W^K)^T + (x_i W^Q)(p_j U^K)^T
//                             + (p_i U^Q)(x_j W^K)^T + (p_i U^Q)(p_j U^K)^T)
// with p = LN(table) and the biases (b^Q, b^K with W; c^Q, c^K with U) on the side of their
// projection; softmax, values, FFN, LayerNorms and the MLM head follow. Random weights (every
// bias and LayerNorm affine non-trivial) and inputs, fresh each run; padded rows; post- and
// pre-LN; tolerance 1e-10 relative.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "common/error.h"
#include "model/tupe_bert.h"
#include "float64_reference.h"
#include "model_test_util.h"

namespace {

using tupe::model::LayerNormPlacement;
using tupe::model::ModelOptions;
using tupe::model::PositionEncoding;
using tupe::model::TupeBert;

using tupe::model::testing::affine;
using tupe::model::testing::heads;
using tupe::model::testing::layer_norm;
using tupe::model::testing::P;
using tupe::model::testing::Reference;

/// The whole BERT-A^d forward in float64 from its definition (eval: no dropout).
Reference reference(TupeBert& m, const ModelOptions& c, const at::Tensor& ids, const at::Tensor& mask) {
  const int64_t B = ids.size(0), L = ids.size(1), H = c.num_heads, dh = c.head_size(), d = c.hidden_size;
  const double eps = c.layer_norm_eps, scale = 1.0 / std::sqrt(4.0 * static_cast<double>(dh));
  // Input: word embeddings only (no position added), then LN.
  const at::Tensor x = layer_norm(P(m, "encoder.embeddings.word.weight").index_select(0, ids.view(-1)).view({B, L, d}),
                                  m, "encoder.embeddings.norm", eps);
  // Positions: LN of table rows 0..L-1 (position t uses row t), U^Q / U^K shared by all layers.
  const at::Tensor p = layer_norm(P(m, "encoder.positional.table.weight").narrow(0, 0, L), m, "encoder.positional.norm", eps);
  const at::Tensor pq = heads(affine(p, m, "encoder.positional.query"), H).unsqueeze(0);  // (1, H, L, dh)
  const at::Tensor pk = heads(affine(p, m, "encoder.positional.key"), H).unsqueeze(0);
  // The four correlations, each its own (B, H, L, L) product.
  return tupe::model::testing::reference_forward(m, c, x, mask, [&](const at::Tensor& q, const at::Tensor& k, int64_t) {
    const at::Tensor word_word = at::matmul(q, k.transpose(-1, -2));
    const at::Tensor word_pos = at::matmul(q, pk.transpose(-1, -2));
    const at::Tensor pos_word = at::matmul(pq, k.transpose(-1, -2));
    const at::Tensor pos_pos = at::matmul(pq, pk.transpose(-1, -2)).expand({B, H, L, L});
    return (word_word + word_pos + pos_word + pos_pos) * scale;
  });
}

class BertAd : public ::testing::TestWithParam<LayerNormPlacement> {};

TEST_P(BertAd, EqualsFourTermFormulaInFloat64) {
  const uint64_t seed = tupe::model::testing::test_seed();
  SCOPED_TRACE(tupe::model::testing::seed_text(seed));
  at::manual_seed(seed);
  ModelOptions cfg = tupe::model::testing::small_config(PositionEncoding::kBertAbsoluteUntied, false, /*d=*/24, /*H=*/3);
  cfg.num_layers = 3;
  cfg.layer_norm = GetParam();
  cfg.layer_norm_eps = 1e-5;
  TupeBert net = tupe::model::testing::random_float64_model(cfg);
  const auto batch = tupe::model::testing::padded_batch(cfg.vocab_size);
  const Reference ref = reference(net, cfg, batch.ids, batch.mask);
  const auto out = net->encoder->forward(batch.ids, batch.mask, {}, /*record_layers=*/true);
  EXPECT_TRUE(out.position_query.defined() && out.position_key.defined());
  EXPECT_EQ(out.attention_bias.sizes(), (std::vector<int64_t>{3, 1, 1, 37})) << "only the padding mask: no L x L bias";
  tupe::model::testing::expect_equals_reference(net, out, batch, ref);
}

INSTANTIATE_TEST_SUITE_P(Placement, BertAd, ::testing::Values(LayerNormPlacement::kPost, LayerNormPlacement::kPre),
                         [](const ::testing::TestParamInfo<LayerNormPlacement>& i) {
                           return std::string(i.param == LayerNormPlacement::kPost ? "post_ln" : "pre_ln");
                         });

TEST(BertAdRules, ConcatenatedHeadsWouldDropTheMixedTerms) {
  // Why q' = q + pq (not [q, pq]): concatenation along the head dimension gives only the
  // word-word and position-position products; the sum gives all four (docs/model.md).
  at::manual_seed(3);
  const at::Tensor q = at::randn({5, 4}, at::kDouble), k = at::randn({5, 4}, at::kDouble);
  const at::Tensor pq = at::randn({5, 4}, at::kDouble), pk = at::randn({5, 4}, at::kDouble);
  const at::Tensor four = q.mm(k.t()) + q.mm(pk.t()) + pq.mm(k.t()) + pq.mm(pk.t());
  EXPECT_LT(((q + pq).mm((k + pk).t()) - four).abs().max().item<double>(), 1e-12);
  const at::Tensor cat = at::cat({q, pq}, 1).mm(at::cat({k, pk}, 1).t());
  EXPECT_GT((cat - four).abs().max().item<double>(), 1e-3);
}

TEST(BertAdRules, ConfigRules) {
  ModelOptions c = tupe::model::testing::small_config(PositionEncoding::kBertAbsoluteUntied, false, 24, 3);
  EXPECT_EQ(tupe::model::to_string(c.position_encoding), "bert-absolute-untied");
  EXPECT_EQ(tupe::model::parse_position_encoding("bert-absolute-untied"), PositionEncoding::kBertAbsoluteUntied);
  EXPECT_DOUBLE_EQ(c.attention_scale(), 1.0 / std::sqrt(4.0 * 8.0));
  EXPECT_FALSE(c.has_absolute_input_positions());
  EXPECT_FALSE(c.has_untied_positions());
  EXPECT_FALSE(c.has_relative_bias());
  EXPECT_TRUE(c.has_position_projections());
  EXPECT_TRUE(c.has_positional_query_key());
  EXPECT_EQ(c.position_table_rows(), c.max_positions);
  c.untie_cls = true;  // BERT-A^d has no positional logit term to reset
  try {
    c.validate();
    FAIL() << "untie_cls with bert-absolute-untied accepted";
  } catch (const tupe::Error& e) {
    EXPECT_NE(std::string(e.what()).find("model.untie_cls"), std::string::npos) << e.what();
  }
}

TEST(BertAdRules, LongerThanTheTableIsAnError) {
  auto cfg = tupe::model::testing::small_config(PositionEncoding::kBertAbsoluteUntied, false);
  tupe::model::Encoder enc(cfg);
  EXPECT_THROW(enc->forward(at::zeros({1, cfg.max_positions + 1}, at::kLong)), tupe::Error);
}

}  // namespace
