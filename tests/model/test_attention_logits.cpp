// Attention logits of every positional variant, with and without the [CLS] untie, against
// a naive float64 element-by-element implementation of TUPE Eq. 7-11 and Eq. 9 written
// here from the paper (docs/model.md), with random weights and inputs fresh each run.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "model/encoder.h"
#include "model_test_util.h"

namespace {

using tupe::model::PositionEncoding;
using Mat = std::vector<std::vector<double>>;  // [row][col]

// x W^T + b for one row vector x (torch Linear convention: W is (out, in)).
std::vector<double> linear_row(const std::vector<double>& x, const at::Tensor& W, const at::Tensor& b) {
  auto w = W.accessor<double, 2>();
  auto bb = b.accessor<double, 1>();
  std::vector<double> y(W.size(0));
  for (int64_t o = 0; o < W.size(0); ++o) {
    double s = bb[o];
    for (int64_t i = 0; i < W.size(1); ++i) s += w[o][i] * x[i];
    y[o] = s;
  }
  return y;
}

std::vector<double> layer_norm_row(const std::vector<double>& x, const at::Tensor& g, const at::Tensor& b, double eps) {
  double mean = 0, var = 0;
  for (double v : x) mean += v;
  mean /= x.size();
  for (double v : x) var += (v - mean) * (v - mean);
  var /= x.size();
  auto gg = g.accessor<double, 1>();
  auto bb = b.accessor<double, 1>();
  std::vector<double> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = (x[i] - mean) / std::sqrt(var + eps) * gg[i] + bb[i];
  return y;
}

std::vector<double> row_of(const at::Tensor& t2d, int64_t r) {
  auto a = t2d.accessor<double, 2>();
  std::vector<double> v(t2d.size(1));
  for (int64_t c = 0; c < t2d.size(1); ++c) v[c] = a[r][c];
  return v;
}

// docs/model.md bucket table (r = j - i), independent of the model's implementation.
int64_t table_bucket(int64_t r) {
  const int64_t n = r < 0 ? -r : r, offset = r > 0 ? 16 : 0;
  if (n < 8) return offset + n;
  const int64_t upper[] = {11, 15, 22, 31, 45, 63, 90};
  for (int64_t k = 0; k < 7; ++k)
    if (n <= upper[k]) return offset + 8 + k;
  return offset + 15;
}

struct Case {
  PositionEncoding pe;
  bool untie;
};
void PrintTo(const Case& c, std::ostream* os) { *os << tupe::model::to_string(c.pe) << (c.untie ? " untie" : " tie"); }

class AttentionLogits : public ::testing::TestWithParam<Case> {};

TEST_P(AttentionLogits, EqualNaiveFloat64) {
  const Case cs = GetParam();
  const uint64_t seed = tupe::model::testing::test_seed();
  SCOPED_TRACE(tupe::model::testing::seed_text(seed));
  at::manual_seed(seed);
  auto cfg = tupe::model::testing::small_config(cs.pe, cs.untie, /*d=*/12, /*H=*/3);
  cfg.max_positions = 140;  // long enough for the log-spaced buckets
  tupe::model::Encoder enc(cfg);
  enc->to(at::kDouble);
  tupe::model::testing::randomize(*enc);
  enc->eval();

  const int64_t B = 2, L = 130, d = cfg.hidden_size, H = cfg.num_heads, dh = d / H;
  at::Tensor ids = at::randint(cfg.vocab_size, {B, L}, at::kLong);
  at::Tensor mask = at::ones({B, L}, at::kLong);
  mask.select(0, 1).narrow(0, L - 9, 9).fill_(0);  // second sequence padded
  auto out = enc->forward(ids, mask, {}, /*record_layers=*/true);
  ASSERT_EQ(out.attention_logits.size(), static_cast<size_t>(cfg.num_layers));

  // Naive positional term (H, L, L), shared by all layers.
  std::vector<Mat> pos(H, Mat(L, std::vector<double>(L, 0.0)));
  const bool tupe = cs.pe == PositionEncoding::kTupeAbsolute || cs.pe == PositionEncoding::kTupeRelative;
  const bool rel = cs.pe == PositionEncoding::kBertRelative || cs.pe == PositionEncoding::kTupeRelative;
  if (tupe) {
    auto& pt = *enc->positional;
    const int64_t rows = cs.untie ? L + 1 : L;
    std::vector<std::vector<double>> pq(rows), pk(rows);
    at::Tensor table = pt.table->weight.detach();
    for (int64_t r = 0; r < rows; ++r) {
      auto ln = layer_norm_row(row_of(table, r), pt.norm->weight.detach(), pt.norm->bias.detach(), cfg.layer_norm_eps);
      pq[r] = linear_row(ln, pt.query->weight.detach(), pt.query->bias.detach());
      pk[r] = linear_row(ln, pt.key->weight.detach(), pt.key->bias.detach());
    }
    auto P = [&](int64_t h, int64_t a, int64_t c) {  // Eq. 10 for table rows a, c
      double s = 0;
      for (int64_t k = 0; k < dh; ++k) s += pq[a][h * dh + k] * pk[c][h * dh + k];
      return s / std::sqrt(2.0 * dh);
    };
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < L; ++i)
        for (int64_t j = 0; j < L; ++j) {
          if (!cs.untie) pos[h][i][j] = P(h, i, j);
          else if (i == 0) pos[h][i][j] = P(h, 0, 0);      // theta_1 (Eq. 9)
          else if (j == 0) pos[h][i][j] = P(h, 1, 1);      // theta_2
          else pos[h][i][j] = P(h, i + 1, j + 1);          // position t uses row t + 1
        }
  }
  if (rel) {
    at::Tensor btab = enc->positional->relative_bias->weight.detach();
    auto b = btab.accessor<double, 2>();  // (33, H)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < L; ++i)
        for (int64_t j = 0; j < L; ++j) {
          int64_t k = table_bucket(j - i);
          if (cs.untie) k = i == 0 ? 16 : (j == 0 ? 32 : k);
          pos[h][i][j] += b[k][h];  // Eq. 11: b unscaled
        }
  }
  const double scale = tupe ? 1.0 / std::sqrt(2.0 * dh) : 1.0 / std::sqrt(1.0 * dh);
  auto mk = mask.accessor<int64_t, 2>();

  for (int64_t l = 0; l < cfg.num_layers; ++l) {
    auto layer = enc->layers[l]->as<tupe::model::EncoderLayerImpl>();
    auto& att = *layer->attention;
    at::Tensor x = out.layer_inputs[l].detach();
    at::Tensor got = out.attention_logits[l].detach();  // (B, H, L, L)
    double max_err = 0, max_ref = 0;
    for (int64_t bi = 0; bi < B; ++bi) {
      std::vector<std::vector<double>> q(L), k(L);
      for (int64_t t = 0; t < L; ++t) {
        auto xr = row_of(x[bi], t);
        q[t] = linear_row(xr, att.query->weight.detach(), att.query->bias.detach());
        k[t] = linear_row(xr, att.key->weight.detach(), att.key->bias.detach());
      }
      at::Tensor got_b = got[bi];
      auto g = got_b.accessor<double, 3>();
      for (int64_t h = 0; h < H; ++h)
        for (int64_t i = 0; i < L; ++i)
          for (int64_t j = 0; j < L; ++j) {
            if (mk[bi][j] == 0) {
              ASSERT_TRUE(std::isinf(g[h][i][j]) && g[h][i][j] < 0) << "padded key not masked";
              continue;
            }
            double s = 0;
            for (int64_t c = 0; c < dh; ++c) s += q[i][h * dh + c] * k[j][h * dh + c];
            const double ref = s * scale + pos[h][i][j];
            max_err = std::max(max_err, std::fabs(g[h][i][j] - ref));
            max_ref = std::max(max_ref, std::fabs(ref));
          }
    }
    EXPECT_LT(max_err / max_ref, 1e-6) << "layer " << l << " max abs err " << max_err;

    // The fused SDPA path uses the same logits: softmax(logits) V W_O + b_O.
    at::Tensor bias = out.attention_bias;
    at::Tensor fused = att.forward(x, bias);
    at::Tensor v = att.value(x).view({B, L, H, dh}).transpose(1, 2);
    at::Tensor ctx = at::matmul(at::softmax(got, -1), v).transpose(1, 2).reshape({B, L, d});
    at::Tensor manual = att.output(ctx);
    EXPECT_LT((fused - manual).abs().max().item<double>() / manual.abs().max().item<double>(), 1e-10);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Variants, AttentionLogits,
    ::testing::Values(Case{PositionEncoding::kBertAbsolute, false}, Case{PositionEncoding::kBertRelative, false},
                      Case{PositionEncoding::kBertRelative, true}, Case{PositionEncoding::kTupeAbsolute, false},
                      Case{PositionEncoding::kTupeAbsolute, true}, Case{PositionEncoding::kTupeRelative, false},
                      Case{PositionEncoding::kTupeRelative, true}),
    [](const ::testing::TestParamInfo<Case>& info) {
      std::string n = tupe::model::to_string(info.param.pe) + (info.param.untie ? "_untie" : "_tie");
      for (auto& ch : n)
        if (ch == '-') ch = '_';
      return n;
    });

}  // namespace
