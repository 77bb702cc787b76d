// The positional term of the attention logits, computed ONCE per forward pass and added to
// the logits of every layer (TUPE Eq. 7-11; docs/model.md).
//
// Shape legend: L sequence length, d model width, H heads, d_h = d / H.
//   TUPE-A:  out = reset_theta(P)        TUPE-R: out = reset_theta(P + B)
//   BERT-R:  out = B (B with [CLS] buckets when untie_cls)
//   BERT-A:  no positional logit term (positions enter through the input embedding)
//   BERT-A^d: no positional logit term either; query_key(L) gives the projected positions
//            pq_h[t] = LN(p_t) U^Q_h + c^Q_h, pk_h[t] = LN(p_t) U^K_h + c^K_h   (H, L, d_h) each,
//            which the encoder adds to every layer's q and k (docs/model.md "BERT-A^d")
// where
//   P_h[i, j] = (LN(p_i) U^Q_h + b^Q_h) . (LN(p_j) U^K_h + b^K_h) / sqrt(2 d_h)     (Eq. 7, 10)
//   B_h[i, j] = b_{bucket(j - i), h}  (learned, unscaled, shared by all layers)      (Eq. 8, 11)
//   reset_theta(v)[i, j] = v[i, j] (i, j != 0); theta_1 (i = 0); theta_2 (i != 0, j = 0)  (Eq. 9)
// [CLS] untie in the reference code's parameterisation: table row 0 plays p_theta1, row 1
// p_theta2, sequence position t >= 1 uses row t + 1; theta_1 = P(row 0, row 0),
// theta_2 = P(row 1, row 1); with the relative bias the [CLS] row uses bucket
// num_buckets / 2 and the [CLS] column bucket num_buckets. Without the untie, position t
// uses row t and nothing is reset.
#pragma once
#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/pimpl.h>
#include <utility>

#include "model/config.h"

namespace tupe::model {

class PositionalTermImpl : public torch::nn::Module {
 public:
  explicit PositionalTermImpl(const ModelOptions& config);
  void reset_parameters();

  /// True when the variant has a positional logit term (all but BERT-A and BERT-A^d).
  bool active() const { return config.has_positional_logit_term(); }

  /// The additive positional logits for a length-L sequence.
  /// Returns (H, L, L) in the parameters' dtype; undefined tensor for BERT-A and BERT-A^d.
  /// Throws tupe::Error when L > max_positions.
  at::Tensor forward(int64_t L);

  /// TUPE's untied term before the reset, over the table rows used: (H, rows, rows).
  /// For analysis (`tupe analyze` heatmaps). Requires a TUPE variant.
  at::Tensor raw_position_correlation(int64_t rows);

  /// The projected table rows [0, rows), unscaled, split by head: {LN(p) U^Q + c^Q,
  /// LN(p) U^K + c^K}, each (H, rows, d_h) in the parameters' (autocast) dtype. BERT-A^d adds
  /// them to q and k (position t uses row t); TUPE's P is their scaled product. Requires a
  /// variant with position projections; throws tupe::Error when rows > position_table_rows.
  std::pair<at::Tensor, at::Tensor> query_key(int64_t rows);

  ModelOptions config;
  // TUPE-A/R and BERT-A^d only (registered when has_position_projections()):
  torch::nn::Embedding table{nullptr};  ///< p: (position_table_rows, d)
  torch::nn::LayerNorm norm{nullptr};   ///< LN over d applied to table rows
  torch::nn::Linear query{nullptr};     ///< U^Q: d -> d (with bias)
  torch::nn::Linear key{nullptr};       ///< U^K: d -> d (with bias)
  // BERT-R / TUPE-R:
  torch::nn::Embedding relative_bias{nullptr};  ///< b: (num_buckets + 1, H)

 private:
  bool projections_ = false;  ///< table, norm, query, key exist
  bool untied_ = false;
  bool relative_ = false;
  at::Tensor buckets_;  ///< (max_positions, max_positions) int64 bucket ids, on the parameters' device
};
TORCH_MODULE(PositionalTerm);

}  // namespace tupe::model
