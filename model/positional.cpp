#include "model/positional.h"

#include <ATen/ATen.h>
#include <cmath>
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

at::Tensor PositionalTermImpl::forward(int64_t L) {
  TUPE_CHECK(L <= config.max_positions,
             "model: sequence length " << L << " exceeds model.max_positions = " << config.max_positions);
  if (!active()) return {};
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
