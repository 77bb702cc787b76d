#include "model/encoder.h"

#include <ATen/ATen.h>
#include <limits>
#include <torch/nn/init.h>

#include "model/linear.h"

namespace tupe::model {

EncoderLayerImpl::EncoderLayerImpl(const ModelOptions& c) : config(c) {
  const auto ln = torch::nn::LayerNormOptions({c.hidden_size}).eps(c.layer_norm_eps);
  attention = register_module("attention", SelfAttention(c));
  attention_norm = register_module("attention_norm", torch::nn::LayerNorm(ln));
  ffn_in = register_module("ffn_in", torch::nn::Linear(c.hidden_size, c.ffn_size));
  ffn_out = register_module("ffn_out", torch::nn::Linear(c.ffn_size, c.hidden_size));
  ffn_norm = register_module("ffn_norm", torch::nn::LayerNorm(ln));
  dropout = register_module("dropout", Dropout(c.hidden_dropout));
  reset_parameters();
}

void EncoderLayerImpl::reset_parameters() {
  torch::NoGradGuard no_grad;
  for (auto& lin : {ffn_in, ffn_out}) {
    torch::nn::init::normal_(lin->weight, 0.0, config.init_std);
    torch::nn::init::zeros_(lin->bias);
  }
  for (auto& n : {attention_norm, ffn_norm}) {
    torch::nn::init::ones_(n->weight);
    torch::nn::init::zeros_(n->bias);
  }
}

at::Tensor EncoderLayerImpl::forward(const at::Tensor& x, const PositionInputs& positions) {
  auto ffn = [&](const at::Tensor& h) { return dropout(linear(ffn_out, at::gelu(linear(ffn_in, h)))); };
  if (config.layer_norm == LayerNormPlacement::kPost) {
    at::Tensor h = attention_norm(x + dropout(attention->forward(x, positions)));
    return ffn_norm(h + ffn(h));
  }
  at::Tensor h = x + dropout(attention->forward(attention_norm(x), positions));
  return h + ffn(ffn_norm(h));
}

EncoderImpl::EncoderImpl(const ModelOptions& c) : config(c) {
  c.validate();
  embeddings = register_module("embeddings", Embeddings(c));
  positional = register_module("positional", PositionalTerm(c));
  layers = register_module("layers", torch::nn::ModuleList());
  for (int64_t i = 0; i < c.num_layers; ++i) layers->push_back(EncoderLayer(c));
  if (c.layer_norm == LayerNormPlacement::kPre)
    final_norm = register_module(
        "final_norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({c.hidden_size}).eps(c.layer_norm_eps)));
}

at::Tensor EncoderImpl::attention_bias(int64_t B, int64_t L, const at::Tensor& attention_mask) {
  const auto like = embeddings->word->weight.options();
  at::Tensor bias = positional->forward(L, like);  // (H, L, L) or undefined; once for all layers
  if (bias.defined()) bias = bias.unsqueeze(0);  // (1, H, L, L)
  if (attention_mask.defined()) {
    at::Tensor real = attention_mask.to(at::kBool).view({B, 1, 1, L});
    at::Tensor pad = at::zeros({B, 1, 1, L}, like)
                         .masked_fill(real.logical_not(), -std::numeric_limits<double>::infinity());
    bias = bias.defined() ? bias + pad : pad;  // (B, H, L, L) or (B, 1, 1, L)
  }
  return bias;
}

EncoderOutput EncoderImpl::forward(const at::Tensor& input_ids, const at::Tensor& attention_mask,
                                   const at::Tensor& segment_ids, bool record_layers) {
  const int64_t B = input_ids.size(0), L = input_ids.size(1);
  EncoderOutput out;
  at::Tensor x = embeddings->forward(input_ids, segment_ids);
  // (B, H, L, L) / (B, 1, 1, L) in the parameters' dtype, then cast once (a no-op without
  // autocast): the layers' uses all hang off this one tensor in the autograd graph.
  at::Tensor bias = attention_bias(B, L, attention_mask);
  if (bias.defined()) bias = bias.to(attention_compute_dtype(bias));
  out.attention_bias = bias;
  if (config.has_positional_query_key()) {
    // BERT-A^d: (H, L, d_h) each, once for all layers (position t uses table row t), cast once.
    auto [pq, pk] = positional->query_key(L);
    out.position_query = pq.unsqueeze(0).to(attention_compute_dtype(pq));  // (1, H, L, d_h)
    out.position_key = pk.unsqueeze(0).to(attention_compute_dtype(pk));
  }
  if (config.has_rotary()) {
    // RoPE: (L, d_h) each, once for all layers, in the compute dtype (computed in float64).
    const auto like = embeddings->word->weight.options();
    auto [cos, sin] = positional->rotary(L, like.dtype(attention_compute_dtype(embeddings->word->weight)));
    out.rope_cos = cos.view({1, 1, L, -1});  // (1, 1, L, d_h)
    out.rope_sin = sin.view({1, 1, L, -1});
  }
  const PositionInputs positions{out.attention_bias, out.position_query, out.position_key, out.rope_cos,
                                 out.rope_sin};
  for (const auto& m : *layers) {
    auto layer = m->as<EncoderLayerImpl>();
    if (record_layers) {
      out.layer_inputs.push_back(x);
      at::Tensor attn_in = config.layer_norm == LayerNormPlacement::kPre ? layer->attention_norm(x) : x;
      out.attention_logits.push_back(layer->attention->logits(attn_in, positions));
    }
    x = layer->forward(x, positions);
  }
  if (final_norm) x = final_norm(x);
  out.hidden = x;
  return out;
}

}  // namespace tupe::model
