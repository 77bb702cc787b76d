// RoPE, ALiBi and NoPE (model.position_encoding = rope | alibi | none; docs/model.md) against a
// float64 forward written from their papers, not from the model's code:
//   RoPE (Su et al., RoFormer, Eq. 13-15 and 34): q_t and k_t of every layer multiplied by the
//     block-diagonal rotation R_t, one 2 x 2 block [[cos t theta_i, -sin t theta_i],
//     [sin t theta_i, cos t theta_i]] per feature pair, theta_i = b^(-2i/d_h); the pair of
//     feature i is (i, i + d_h/2) (docs/model.md "RoPE": the half-split pairing); built here as
//     explicit d_h x d_h matrices, one per position.
//   ALiBi (Press et al., 2022, Sec. 3; symmetric |i - j| for an encoder, as MosaicBERT): the bias
//     -m_h |i - j| with the slopes of the authors' code (the geometric sequence starting and
//     stepping at 2^(-8/n) for n a power of two; otherwise the n = 2^floor(log2 H) sequence and
//     every other slope of the 2n sequence), written here in that form.
//   NoPE: q k^T / sqrt(d_h) and nothing else.
// Random weights and inputs, fresh each run; padded rows; post- and pre-LN; 1e-10 relative.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "common/error.h"
#include "float64_reference.h"
#include "model/positional.h"
#include "model/tupe_bert.h"
#include "model_test_util.h"

namespace {

using tupe::model::LayerNormPlacement;
using tupe::model::ModelOptions;
using tupe::model::PositionEncoding;
using tupe::model::TupeBert;
using tupe::model::testing::layer_norm;
using tupe::model::testing::P;
using tupe::model::testing::Reference;

/// ALiBi's slopes as the authors' code states them: for n a power of two, start = ratio =
/// 2^(-2^(-(log2 n - 3))), slopes start * ratio^i (i < n); otherwise the closest power of two's
/// slopes followed by the even-indexed slopes of twice that many heads, up to H.
std::vector<double> alibi_slopes_reference(int64_t H) {
  auto power_of_two = [](int64_t n) {
    const double start = std::pow(2.0, -std::pow(2.0, -(std::log2(static_cast<double>(n)) - 3.0)));
    std::vector<double> s;
    for (int64_t i = 0; i < n; ++i) s.push_back(start * std::pow(start, static_cast<double>(i)));
    return s;
  };
  const double lg = std::log2(static_cast<double>(H));
  if (lg == std::floor(lg)) return power_of_two(H);
  const int64_t closest = int64_t{1} << static_cast<int64_t>(std::floor(lg));
  std::vector<double> s = power_of_two(closest);
  const std::vector<double> twice = power_of_two(2 * closest);
  for (size_t i = 0; i < twice.size() && static_cast<int64_t>(s.size()) < H; i += 2) s.push_back(twice[i]);
  return s;
}

/// RoFormer's R_t for t in [0, L): (L, d_h, d_h), float64; pair i = features (i, i + d_h/2).
at::Tensor rotation_matrices(int64_t L, int64_t dh, double base) {
  at::Tensor R = at::zeros({L, dh, dh}, at::kDouble);
  auto a = R.accessor<double, 3>();
  for (int64_t t = 0; t < L; ++t)
    for (int64_t i = 0; i < dh / 2; ++i) {
      const double angle = static_cast<double>(t) * std::pow(base, -2.0 * static_cast<double>(i) / static_cast<double>(dh));
      const int64_t x = i, y = i + dh / 2;
      a[t][x][x] = std::cos(angle);
      a[t][x][y] = -std::sin(angle);
      a[t][y][x] = std::sin(angle);
      a[t][y][y] = std::cos(angle);
    }
  return R;
}

/// The whole forward of a rope / alibi / none model in float64 from the papers (eval).
Reference reference(TupeBert& m, const ModelOptions& c, const at::Tensor& ids, const at::Tensor& mask) {
  const int64_t B = ids.size(0), L = ids.size(1), H = c.num_heads, dh = c.head_size(), d = c.hidden_size;
  const double scale = 1.0 / std::sqrt(static_cast<double>(dh));
  // Input: word embeddings only, then LN (no position table in any of the three).
  const at::Tensor x = layer_norm(P(m, "encoder.embeddings.word.weight").index_select(0, ids.view(-1)).view({B, L, d}),
                                  m, "encoder.embeddings.norm", c.layer_norm_eps);
  const at::Tensor R = rotation_matrices(L, dh, c.rope_base);  // (L, dh, dh)
  at::Tensor alibi = at::zeros({1, H, L, L}, at::kDouble);
  if (c.position_encoding == PositionEncoding::kAlibi) {
    const std::vector<double> m_h = alibi_slopes_reference(H);
    auto a = alibi.accessor<double, 4>();
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < L; ++i)
        for (int64_t j = 0; j < L; ++j) a[0][h][i][j] = -m_h[h] * static_cast<double>(std::abs(i - j));
  }
  return tupe::model::testing::reference_forward(m, c, x, mask, [&](at::Tensor q, at::Tensor k, int64_t) {
    if (c.position_encoding == PositionEncoding::kRotary) {  // q_t <- R_t q_t, k_t <- R_t k_t
      q = at::matmul(R, q.unsqueeze(-1)).squeeze(-1);
      k = at::matmul(R, k.unsqueeze(-1)).squeeze(-1);
    }
    return at::matmul(q, k.transpose(-1, -2)) * scale + alibi;
  });
}

class Encodings : public ::testing::TestWithParam<std::tuple<PositionEncoding, LayerNormPlacement>> {};

TEST_P(Encodings, EqualsThePapersFormulaInFloat64) {
  const auto [pe, placement] = GetParam();
  const uint64_t seed = tupe::model::testing::test_seed();
  SCOPED_TRACE(tupe::model::testing::seed_text(seed));
  at::manual_seed(seed);
  // H = 3 (not a power of two: ALiBi's extended slopes), d_h = 8; a RoPE base other than the default.
  ModelOptions cfg = tupe::model::testing::small_config(pe, false, /*d=*/24, /*H=*/3);
  cfg.num_layers = 3;
  cfg.layer_norm = placement;
  cfg.layer_norm_eps = 1e-5;
  cfg.rope_base = 500.0;
  TupeBert net = tupe::model::testing::random_float64_model(cfg);
  EXPECT_TRUE(net->encoder->embeddings->position.is_empty()) << "no input position table";
  const auto batch = tupe::model::testing::padded_batch(cfg.vocab_size);
  const Reference ref = reference(net, cfg, batch.ids, batch.mask);
  const auto out = net->encoder->forward(batch.ids, batch.mask, {}, /*record_layers=*/true);
  EXPECT_EQ(out.rope_cos.defined(), pe == PositionEncoding::kRotary);
  const std::vector<int64_t> bias_shape = pe == PositionEncoding::kAlibi ? std::vector<int64_t>{3, 3, 37, 37}
                                                                         : std::vector<int64_t>{3, 1, 1, 37};
  EXPECT_EQ(out.attention_bias.sizes(), bias_shape) << "an L x L bias for ALiBi only";
  EXPECT_FALSE(out.attention_bias.requires_grad()) << "none of the three has a learned logit term";
  tupe::model::testing::expect_equals_reference(net, out, batch, ref);
}

INSTANTIATE_TEST_SUITE_P(
    Variants, Encodings,
    ::testing::Combine(::testing::Values(PositionEncoding::kRotary, PositionEncoding::kAlibi, PositionEncoding::kNone),
                       ::testing::Values(LayerNormPlacement::kPost, LayerNormPlacement::kPre)),
    [](const ::testing::TestParamInfo<std::tuple<PositionEncoding, LayerNormPlacement>>& i) {
      return tupe::model::to_string(std::get<0>(i.param)) +
             (std::get<1>(i.param) == LayerNormPlacement::kPost ? "_post_ln" : "_pre_ln");
    });

TEST(EncodingRules, AlibiSlopesAreThePapers) {
  // Press et al.: 8 heads give 1/2, 1/4, ..., 1/256; 12 heads the 8-head slopes, then
  // 2^-0.5, 2^-1.5, 2^-2.5, 2^-3.5 (every other slope of the 16-head sequence).
  for (int64_t H : {1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 20, 24}) {
    const at::Tensor got = tupe::model::PositionalTermImpl::alibi_slopes(H);
    const std::vector<double> want = alibi_slopes_reference(H);
    ASSERT_EQ(got.numel(), static_cast<int64_t>(want.size())) << H << " heads";
    for (int64_t h = 0; h < H; ++h) EXPECT_NEAR(got[h].item<double>(), want[h], 1e-15) << H << " heads, head " << h;
  }
  const at::Tensor twelve = tupe::model::PositionalTermImpl::alibi_slopes(12);
  EXPECT_DOUBLE_EQ(twelve[0].item<double>(), 0.5);
  EXPECT_DOUBLE_EQ(twelve[7].item<double>(), 1.0 / 256.0);
  EXPECT_NEAR(twelve[8].item<double>(), std::sqrt(0.5), 1e-15);
  EXPECT_NEAR(twelve[11].item<double>(), std::pow(2.0, -3.5), 1e-15);
}

TEST(EncodingRules, RopeLogitsDependOnTheOffsetOnly) {
  // RoFormer Eq. 16: (R_m q)^T (R_n k) = q^T R_(n-m) k, so shifting both positions by s changes
  // nothing, and the rotation keeps every vector's length.
  ModelOptions c = tupe::model::testing::small_config(PositionEncoding::kRotary, false, 32, 2);
  tupe::model::PositionalTerm pos(c);
  const auto f64 = at::TensorOptions().dtype(at::kDouble);
  const auto [cos, sin] = pos->rotary(300, f64);  // past max_positions (40): computed for any length
  at::manual_seed(7);
  const at::Tensor q = at::randn({16}, f64), k = at::randn({16}, f64);
  auto rot = [&](const at::Tensor& v, int64_t t) { return tupe::model::apply_rotary(v, cos[t], sin[t]); };
  for (auto [m, n, s] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{{0, 5, 17}, {3, 1, 250}, {9, 9, 100}}) {
    const double a = rot(q, m).dot(rot(k, n)).item<double>(), b = rot(q, m + s).dot(rot(k, n + s)).item<double>();
    EXPECT_NEAR(a, b, 1e-12) << m << ", " << n << " shifted by " << s;
    EXPECT_NEAR(rot(q, m + s).norm().item<double>(), q.norm().item<double>(), 1e-12);
  }
  EXPECT_GT(std::fabs(rot(q, 0).dot(rot(k, 5)).item<double>() - rot(q, 0).dot(rot(k, 6)).item<double>()), 1e-6)
      << "the offset must matter";
}

TEST(EncodingRules, NopeIsPermutationEquivariant) {
  // No positional information: permuting the tokens permutes the outputs (and nothing else);
  // RoPE and ALiBi break this.
  for (auto pe : {PositionEncoding::kNone, PositionEncoding::kRotary, PositionEncoding::kAlibi}) {
    at::manual_seed(11);
    ModelOptions c = tupe::model::testing::small_config(pe, false);
    tupe::model::Encoder enc(c);
    enc->to(at::kDouble);
    tupe::model::testing::randomize(*enc, 0.5);
    enc->eval();
    const at::Tensor ids = at::randint(c.vocab_size, {1, 12}, at::kLong), perm = at::randperm(12, at::kLong);
    const at::Tensor a = enc->forward(ids).hidden.index_select(1, perm), b = enc->forward(ids.index_select(1, perm)).hidden;
    const double diff = (a - b).abs().max().item<double>();
    if (pe == PositionEncoding::kNone) EXPECT_LT(diff, 1e-12);
    else EXPECT_GT(diff, 1e-6) << tupe::model::to_string(pe) << " ignores positions";
  }
}

TEST(EncodingRules, ComputedPositionsRunPastMaxPositions) {
  for (auto pe : {PositionEncoding::kRotary, PositionEncoding::kAlibi, PositionEncoding::kNone}) {
    ModelOptions c = tupe::model::testing::small_config(pe, false);
    tupe::model::Encoder enc(c);
    EXPECT_EQ(c.longest_sequence(), std::numeric_limits<int64_t>::max());
    EXPECT_EQ(enc->forward(at::zeros({1, 3 * c.max_positions}, at::kLong)).hidden.size(1), 3 * c.max_positions);
  }
  for (auto pe : {PositionEncoding::kBertAbsolute, PositionEncoding::kBertRelative}) {
    ModelOptions c = tupe::model::testing::small_config(pe, false);
    tupe::model::Encoder enc(c);
    EXPECT_EQ(c.longest_sequence(), c.max_positions);
    EXPECT_THROW(enc->forward(at::zeros({1, c.max_positions + 1}, at::kLong)), tupe::Error);
  }
}

TEST(EncodingRules, ConfigRules) {
  for (auto [pe, word, name] : std::vector<std::tuple<PositionEncoding, std::string, std::string>>{
           {PositionEncoding::kRotary, "rope", "RoPE"},
           {PositionEncoding::kAlibi, "alibi", "ALiBi"},
           {PositionEncoding::kNone, "none", "NoPE"}}) {
    ModelOptions c = tupe::model::testing::small_config(pe, false, 24, 3);
    EXPECT_EQ(tupe::model::to_string(pe), word);
    EXPECT_EQ(tupe::model::parse_position_encoding(word), pe);
    EXPECT_EQ(tupe::model::variant_name(c), name);
    EXPECT_DOUBLE_EQ(c.attention_scale(), 1.0 / std::sqrt(8.0));
    EXPECT_FALSE(c.has_absolute_input_positions() || c.has_position_projections() || c.has_learned_logit_term());
    c.untie_cls = true;  // nothing to untie
    try {
      c.validate();
      FAIL() << "untie_cls with " << word << " accepted";
    } catch (const tupe::Error& e) {
      EXPECT_NE(std::string(e.what()).find("model.untie_cls"), std::string::npos) << e.what();
    }
  }
  ModelOptions odd = tupe::model::testing::small_config(PositionEncoding::kRotary, false, 12, 4);  // d_h = 3
  try {
    odd.validate();
    FAIL() << "rope with an odd d_h accepted";
  } catch (const tupe::Error& e) {
    EXPECT_NE(std::string(e.what()).find("must be even"), std::string::npos) << e.what();
  }
  odd.position_encoding = PositionEncoding::kAlibi;  // any d_h
  EXPECT_NO_THROW(odd.validate());
}

TEST(EncodingRules, CheckpointsFromBeforeRopeBaseStillRead) {
  // A saved config without model.rope_base (every checkpoint written before it existed) reads
  // with the key's one value that keeps its meaning; any other missing key is still refused.
  const ModelOptions c = tupe::model::testing::small_config(PositionEncoding::kTupeRelative, true);
  tupe::KeyValues saved;
  for (const auto& f : ModelOptions::fields().fields())
    if (f.name != "rope_base") saved["model." + f.name] = f.get(c);
  const ModelOptions read = tupe::model::model_config_from_saved(saved, "old/trainer_state.json");
  EXPECT_DOUBLE_EQ(read.rope_base, 10000.0);
  EXPECT_EQ(read.position_encoding, PositionEncoding::kTupeRelative);
  saved.erase("model.hidden_size");
  EXPECT_THROW(tupe::model::model_config_from_saved(saved, "old/trainer_state.json"), tupe::Error);
}

}  // namespace
