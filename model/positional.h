// The positional term of the attention logits, computed ONCE per forward pass and added to
// the logits of every layer (TUPE Eq. 7-11; docs/model.md).
//
// Shape legend: L sequence length, d model width, H heads, d_h = d / H.
//   TUPE-A:  out = reset_theta(P)        TUPE-R: out = reset_theta(P + B)
//   BERT-R:  out = B (B with [CLS] buckets when untie_cls)
//   ALiBi:   out_h[i, j] = -m_h |i - j|, constant (no parameters)  (Press et al. 2022, symmetric)
//            m_h = 2^(-8 h / H), h = 1..H, for H a power of two; otherwise the first n = 2^floor(log2 H)
//            slopes of that rule for n heads, then the odd-numbered slopes of the rule for 2n heads
//            (2^(-4 (2k - 1) / n), k = 1..H - n), as Press et al.'s code extends it
//   RoPE:    no logit term; rotary(L) gives cos, sin (L, d_h) with angle[t, i] = t theta_(i mod d_h/2),
//            theta_i = b^(-2 i / d_h) (RoFormer Eq. 15, b = model.rope_base), which every layer's
//            attention applies to q and k (model/attention.h)
//   NoPE:    nothing at all
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

  /// True when the variant has a positional logit term (TUPE-A/R, BERT-R, ALiBi).
  bool active() const { return config.has_positional_logit_term(); }

  /// The additive positional logits for a length-L sequence: (H, L, L) in the parameters' dtype
  /// (ALiBi, which has none: in `options`' dtype and on its device); undefined for BERT-A,
  /// BERT-A^d, RoPE and NoPE. Throws tupe::Error when L > config.longest_sequence().
  at::Tensor forward(int64_t L, const at::TensorOptions& options = {});

  /// ALiBi's slopes m_h (above): (H) float64 on the CPU.
  static at::Tensor alibi_slopes(int64_t num_heads);

  /// RoPE's {cos, sin} of angle[t, i] = t theta_(i mod d_h/2) for t in [0, L): (L, d_h) each, in
  /// `options`' dtype and on its device, computed in float64. Requires rope.
  std::pair<at::Tensor, at::Tensor> rotary(int64_t L, const at::TensorOptions& options);

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
  at::Tensor alibi_;    ///< ALiBi: -m_h |i - j|, (H, alibi_rows_, alibi_rows_) in the last forward's dtype and device
  int64_t alibi_rows_ = 0;
  /// RoPE: cos and sin of the last call's device and dtype, for rope_rows_ positions.
  at::Tensor rope_cos_, rope_sin_;
  int64_t rope_rows_ = 0;
};
TORCH_MODULE(PositionalTerm);

}  // namespace tupe::model
