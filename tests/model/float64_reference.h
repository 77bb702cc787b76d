// A float64 TUPE-BERT encoder written from the papers (BERT's layer, the encodings' own logits),
// not from the model's code, for the model tests that compare a variant with its formula.
// Shape legend: B batch, L sequence length, d width, H heads, d_h = d / H, V vocabulary.
//   layer:  q, k, v = a W^{Q,K,V} + b        (a = x post-LN, LN(x) pre-LN)
//           alpha   = logits(q, k, layer) + pad      (the variant's part: a callback)
//           attn    = (softmax(alpha) v) W^O + b^O
//           post-LN: h = LN(x + attn); x = LN(h + FFN(h))     pre-LN: h = x + attn; x = h + FFN(LN(h))
//   FFN(h) = GELU_erf(h W_1 + b_1) W_2 + b_2; MLM: (LN(GELU(x W_t + b_t)) E^T + b) at every position
#pragma once
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "model/tupe_bert.h"

namespace tupe::model::testing {

/// The named parameter of `m` (detached). Throws std::runtime_error for an unknown name.
inline at::Tensor P(TupeBert& m, const std::string& name) {
  for (const auto& item : m->named_parameters())
    if (item.key() == name) return item.value().detach();
  throw std::runtime_error("no parameter " + name);
}

/// x W^T + b (torch Linear convention: W is (out, in)), rows of x: (..., in) -> (..., out).
inline at::Tensor affine(const at::Tensor& x, TupeBert& m, const std::string& prefix) {
  return at::matmul(x, P(m, prefix + ".weight").t()) + P(m, prefix + ".bias");
}

/// LayerNorm over the last dimension with the biased variance, as written in the BERT paper.
inline at::Tensor layer_norm(const at::Tensor& x, TupeBert& m, const std::string& prefix, double eps) {
  const at::Tensor mean = x.mean(-1, true);
  const at::Tensor var = (x - mean).pow(2).mean(-1, true);
  return (x - mean) / at::sqrt(var + eps) * P(m, prefix + ".weight") + P(m, prefix + ".bias");
}

inline at::Tensor gelu_erf(const at::Tensor& x) { return 0.5 * x * (1.0 + at::erf(x / std::sqrt(2.0))); }

/// (B, L, d) or (L, d) -> heads (B, H, L, d_h) or (H, L, d_h).
inline at::Tensor heads(const at::Tensor& t, int64_t H) {
  auto s = t.sizes().vec();
  const int64_t d = s.back();
  s.back() = H;
  s.push_back(d / H);
  return t.reshape(s).transpose(-3, -2);
}

/// What reference_forward returns (float64).
struct Reference {
  std::vector<at::Tensor> logits;  ///< per layer (B, H, L, L), -inf at padded keys
  std::vector<at::Tensor> inputs;  ///< per layer (B, L, d)
  at::Tensor hidden;               ///< (B, L, d)
  at::Tensor mlm;                  ///< (B*L, V) at every position
};

/// The variant's pre-softmax logits from a layer's q, k (B, H, L, d_h) and its index, without the
/// padding: (B, H, L, L).
using LogitsFn = std::function<at::Tensor(const at::Tensor& q, const at::Tensor& k, int64_t layer)>;

/// The encoder and MLM head of `m` (config c) in float64 (eval: no dropout) from the embedded
/// input x0 (B, L, d) (after the embedding LN), the variant's logits and the padding mask (B, L)
/// (1 = real token).
inline Reference reference_forward(TupeBert& m, const ModelOptions& c, at::Tensor x, const at::Tensor& mask,
                                   const LogitsFn& logits) {
  const int64_t B = x.size(0), L = x.size(1), H = c.num_heads, d = c.hidden_size;
  const double eps = c.layer_norm_eps;
  const at::Tensor pad = at::zeros({B, 1, 1, L}, at::kDouble).masked_fill(mask.view({B, 1, 1, L}) == 0, -INFINITY);
  Reference r;
  const bool pre = c.layer_norm == LayerNormPlacement::kPre;
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const std::string pre_fix = "encoder.layers." + std::to_string(l) + ".";
    r.inputs.push_back(x);
    const at::Tensor a_in = pre ? layer_norm(x, m, pre_fix + "attention_norm", eps) : x;
    const at::Tensor q = heads(affine(a_in, m, pre_fix + "attention.query"), H);  // (B, H, L, dh)
    const at::Tensor k = heads(affine(a_in, m, pre_fix + "attention.key"), H);
    const at::Tensor v = heads(affine(a_in, m, pre_fix + "attention.value"), H);
    const at::Tensor alpha = logits(q, k, l) + pad;
    r.logits.push_back(alpha);
    const at::Tensor ctx = at::matmul(at::softmax(alpha, -1), v).transpose(1, 2).reshape({B, L, d});
    const at::Tensor attn = affine(ctx, m, pre_fix + "attention.output");
    auto ffn = [&](const at::Tensor& h) {
      return affine(gelu_erf(affine(h, m, pre_fix + "ffn_in")), m, pre_fix + "ffn_out");
    };
    if (pre) {
      const at::Tensor h = x + attn;
      x = h + ffn(layer_norm(h, m, pre_fix + "ffn_norm", eps));
    } else {
      const at::Tensor h = layer_norm(x + attn, m, pre_fix + "attention_norm", eps);
      x = layer_norm(h + ffn(h), m, pre_fix + "ffn_norm", eps);
    }
  }
  if (pre) x = layer_norm(x, m, "encoder.final_norm", eps);
  r.hidden = x;
  const at::Tensor t = layer_norm(gelu_erf(affine(x, m, "mlm_head.dense")), m, "mlm_head.norm", eps);
  r.mlm = (at::matmul(t, P(m, "encoder.embeddings.word.weight").t()) + P(m, "mlm_head.bias")).view({B * L, -1});
  return r;
}

/// max |got - want| / max |want| over the finite entries of want; fails the test when the
/// -inf (masked) entries of the two differ.
inline double rel_err(const at::Tensor& got, const at::Tensor& want) {
  const at::Tensor finite = at::isfinite(want);
  if (!at::equal(finite, at::isfinite(got))) return INFINITY;  // the masked (-inf) entries differ
  const at::Tensor zero = at::zeros({}, at::kDouble);
  const at::Tensor g = at::where(finite, got, zero), w = at::where(finite, want, zero);
  return (g - w).abs().max().item<double>() / w.abs().max().item<double>();
}

/// A fresh model of `cfg` in float64, every parameter N(0, 0.5) (biases and LayerNorm affine terms
/// non-trivial), in eval mode.
inline TupeBert random_float64_model(const ModelOptions& cfg) {
  TupeBert net(cfg);
  net->to(at::kDouble);
  torch::NoGradGuard no_grad;
  for (auto& p : net->parameters()) p.normal_(0.0, 0.5);
  net->eval();
  return net;
}

/// The batch the reference tests run: 3 rows of 37 random ids (B, L) int64 and their mask, row 1
/// real up to position 30, row 2 up to 11.
struct PaddedBatch {
  at::Tensor ids, mask;
};
inline PaddedBatch padded_batch(int64_t vocab_size) {
  const int64_t B = 3, L = 37;
  PaddedBatch b{at::randint(vocab_size, {B, L}, at::kLong), at::ones({B, L}, at::kLong)};
  b.mask[1].narrow(0, 30, L - 30).fill_(0);
  b.mask[2].narrow(0, 11, L - 11).fill_(0);
  return b;
}

/// Expects the encoder output `out` of `net` on `b` (recorded layers) and its MLM logits at every
/// position, in eval mode and through the explicit CPU training path (every layer's attention
/// dropout set to 1e-12, which selects it, so nothing is dropped), to equal `ref` to 1e-10
/// relative. Leaves `net` in training mode.
inline void expect_equals_reference(TupeBert& net, const EncoderOutput& out, const PaddedBatch& b,
                                    const Reference& ref) {
  const int64_t layers = net->config.num_layers, rows = b.ids.numel();
  ASSERT_EQ(out.attention_logits.size(), static_cast<size_t>(layers));
  for (int64_t l = 0; l < layers; ++l) {
    EXPECT_LT(rel_err(out.layer_inputs[l].detach(), ref.inputs[l]), 1e-10) << "input of layer " << l;
    EXPECT_LT(rel_err(out.attention_logits[l].detach(), ref.logits[l]), 1e-10) << "logits of layer " << l;
  }
  EXPECT_LT(rel_err(out.hidden.detach(), ref.hidden), 1e-10) << "encoder output (through SDPA)";
  const at::Tensor mlm = net->mlm_logits(b.ids, b.mask, {}, at::arange(rows, at::kLong)).detach();
  EXPECT_LT(rel_err(mlm, ref.mlm), 1e-10) << "MLM logits";
  for (const auto& layer : *net->encoder->layers)
    layer->as<EncoderLayerImpl>()->attention->config.attention_dropout = 1e-12;
  net->train();
  const at::Tensor trained = net->mlm_logits(b.ids, b.mask, {}, at::arange(rows, at::kLong)).detach();
  EXPECT_LT(rel_err(trained, ref.mlm), 1e-10) << "MLM logits, explicit CPU training path";
}

}  // namespace tupe::model::testing
