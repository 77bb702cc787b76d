#include "model/positional.h"

#include <ATen/ATen.h>
#include <algorithm>
#include <cmath>
#include <vector>
#include <torch/nn/init.h>

#include "common/error.h"
#include "model/linear.h"
#include "model/relative_buckets.h"

namespace tupe::model {

PositionalTermImpl::PositionalTermImpl(const ModelOptions& c) : config(c) {
  projections_ = c.has_position_projections();
  untied_ = c.has_untied_positions();
  relative_ = c.has_relative_bias();
  const int64_t d = c.hidden_size;
  if (projections_) {
    table = register_module("table", torch::nn::Embedding(c.position_table_rows(), d));
    norm = register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({d}).eps(c.layer_norm_eps)));
    query = register_module("query", torch::nn::Linear(d, d));
    key = register_module("key", torch::nn::Linear(d, d));
  }
  if (relative_) {
    relative_bias = register_module("relative_bias", torch::nn::Embedding(c.relative_buckets + 1, c.num_heads));
    // Not a registered buffer: Module::to(dtype) would cast the int64 ids to floating point.
    buckets_ = relative_bucket_matrix(c.max_positions, c.relative_buckets, c.relative_max_distance, c.untie_cls);
  }
  reset_parameters();
}

void PositionalTermImpl::reset_parameters() {
  torch::NoGradGuard no_grad;
  if (projections_) {
    torch::nn::init::normal_(table->weight, 0.0, config.init_std);
    torch::nn::init::ones_(norm->weight);
    torch::nn::init::zeros_(norm->bias);
    for (auto& lin : {query, key}) {
      torch::nn::init::normal_(lin->weight, 0.0, config.init_std);
      torch::nn::init::zeros_(lin->bias);
    }
  }
  if (relative_) torch::nn::init::normal_(relative_bias->weight, 0.0, config.init_std);
}

std::pair<at::Tensor, at::Tensor> PositionalTermImpl::query_key(int64_t rows) {
  TUPE_CHECK(projections_, "positional term: " << to_string(config.position_encoding) << " has no position projections");
  TUPE_CHECK(rows <= config.position_table_rows(),
             "positional term: " << rows << " rows requested, table has " << config.position_table_rows());
  const int64_t H = config.num_heads, dh = config.head_size();
  at::Tensor p = norm(table->weight.narrow(0, 0, rows));                     // (rows, d)
  at::Tensor pq = linear(query, p).view({rows, H, dh}).transpose(0, 1);     // (H, rows, dh)
  at::Tensor pk = linear(key, p).view({rows, H, dh}).transpose(0, 1);       // (H, rows, dh)
  return {pq, pk};
}

at::Tensor PositionalTermImpl::raw_position_correlation(int64_t rows) {
  TUPE_CHECK(untied_, "positional term: no untied position correlation for " << to_string(config.position_encoding));
  const double scale = 1.0 / std::sqrt(2.0 * static_cast<double>(config.head_size()));
  const auto [pq, pk] = query_key(rows);                 // (H, rows, dh) each
  return at::matmul(pq * scale, pk.transpose(1, 2));     // (H, rows, rows)
}

at::Tensor PositionalTermImpl::alibi_slopes(int64_t H) {
  // The geometric rule for n heads: m_h = 2^(-8 h / n), h = 1..n.
  auto rule = [](int64_t n, int64_t h) { return std::pow(2.0, -8.0 * static_cast<double>(h) / static_cast<double>(n)); };
  int64_t n = 1;
  while (n * 2 <= H) n *= 2;  // the largest power of two <= H
  std::vector<double> m;
  for (int64_t h = 1; h <= n; ++h) m.push_back(rule(n, h));
  for (int64_t k = 1; k <= H - n; ++k) m.push_back(rule(2 * n, 2 * k - 1));  // 2n heads' odd-numbered slopes
  return at::tensor(m, at::kDouble);
}

std::pair<at::Tensor, at::Tensor> PositionalTermImpl::rotary(int64_t L, const at::TensorOptions& options) {
  TUPE_CHECK(config.has_rotary(), "positional term: " << to_string(config.position_encoding) << " has no rotation");
  const bool cached = rope_rows_ >= L && rope_cos_.defined() && rope_cos_.device() == options.device() &&
                      rope_cos_.scalar_type() == c10::typeMetaToScalarType(options.dtype());
  if (!cached) {
    const int64_t dh = config.head_size(), rows = std::max(L, config.max_positions);
    const auto f64 = at::TensorOptions().dtype(at::kDouble);
    const at::Tensor i = at::arange(dh / 2, f64);                                          // (d_h/2)
    const at::Tensor theta = at::pow(config.rope_base, -2.0 * i / static_cast<double>(dh));  // theta_i
    const at::Tensor angle = at::outer(at::arange(rows, f64), theta).repeat({1, 2});     // (rows, d_h)
    rope_cos_ = at::cos(angle).to(options);
    rope_sin_ = at::sin(angle).to(options);
    rope_rows_ = rows;
  }
  return {rope_cos_.narrow(0, 0, L), rope_sin_.narrow(0, 0, L)};
}

at::Tensor PositionalTermImpl::forward(int64_t L, const at::TensorOptions& options) {
  TUPE_CHECK(L <= config.longest_sequence(),
             "model: sequence length " << L << " exceeds model.max_positions = " << config.max_positions);
  if (!active()) return {};
  if (config.has_alibi()) {
    // A constant: computed in float64 once per (device, dtype) for max(L, max_positions) rows;
    // each forward copies out its (H, L, L) corner.
    const bool cached = alibi_rows_ >= L && alibi_.defined() && alibi_.device() == options.device() &&
                        alibi_.scalar_type() == c10::typeMetaToScalarType(options.dtype());
    if (!cached) {
      const int64_t rows = std::max(L, config.max_positions);
      const at::Tensor t = at::arange(rows, at::kDouble);
      const at::Tensor distance = (t.unsqueeze(1) - t.unsqueeze(0)).abs();                 // (rows, rows): |i - j|
      alibi_ = (-alibi_slopes(config.num_heads).view({-1, 1, 1}) * distance).to(options);  // (H, rows, rows)
      alibi_rows_ = rows;
    }
    return alibi_.narrow(1, 0, L).narrow(2, 0, L).contiguous();  // (H, L, L)
  }
  const bool untie = config.untie_cls;
  at::Tensor out;
  if (untied_) {
    if (untie) {
      at::Tensor P = raw_position_correlation(L + 1);           // (H, L+1, L+1)
      at::Tensor theta1 = P.select(1, 0).select(1, 0);          // (H): P(row0, row0), [CLS] -> others
      at::Tensor theta2 = P.select(1, 1).select(1, 1);          // (H): P(row1, row1), others -> [CLS]
      at::Tensor shifted = P.narrow(1, 1, L).narrow(2, 1, L);   // position t uses row t + 1
      auto opts = at::TensorOptions().dtype(at::kBool).device(P.device());
      at::Tensor is_row0 = at::zeros({L, L}, opts), is_col0 = at::zeros({L, L}, opts);
      is_row0.select(0, 0).fill_(true);
      is_col0.select(1, 0).fill_(true);
      is_col0.select(0, 0).fill_(false);
      out = at::where(is_row0, theta1.view({-1, 1, 1}),
                      at::where(is_col0, theta2.view({-1, 1, 1}), shifted));  // reset_theta(P), Eq. 9
    } else {
      out = raw_position_correlation(L);  // position t uses row t
    }
  }
  if (relative_) {
    const auto device = relative_bias->weight.device();
    if (buckets_.device() != device) buckets_ = buckets_.to(device);  // once per device
    at::Tensor b = buckets_.narrow(0, 0, L).narrow(1, 0, L);           // (L, L) bucket ids
    at::Tensor B = relative_bias(b).permute({2, 0, 1});                  // (H, L, L)
    out = out.defined() ? out + B : B;
  }
  return out.contiguous();
}

}  // namespace tupe::model
