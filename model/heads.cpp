#include "model/heads.h"

#include <ATen/ATen.h>
#include <torch/nn/init.h>

#include "common/error.h"
#include "model/linear.h"

namespace tupe::model {

MlmHeadImpl::MlmHeadImpl(const ModelOptions& c, at::Tensor word_embedding)
    : config(c), decoder_weight(std::move(word_embedding)) {
  dense = register_module("dense", torch::nn::Linear(c.hidden_size, c.hidden_size));
  norm = register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({c.hidden_size}).eps(c.layer_norm_eps)));
  bias = register_parameter("bias", at::zeros({c.vocab_size}));
  reset_parameters();
}

void MlmHeadImpl::reset_parameters() {
  torch::NoGradGuard no_grad;
  torch::nn::init::normal_(dense->weight, 0.0, config.init_std);
  torch::nn::init::zeros_(dense->bias);
  torch::nn::init::ones_(norm->weight);
  torch::nn::init::zeros_(norm->bias);
  bias.zero_();
}

at::Tensor MlmHeadImpl::forward(const at::Tensor& hidden, const at::Tensor& masked_positions) {
  const int64_t d = hidden.size(-1);
  at::Tensor h = hidden.reshape({-1, d}).index_select(0, masked_positions);  // (M, d)
  h = norm(at::gelu(linear(dense, h)));
  return at::linear(h, decoder_weight, bias);  // (M, V)
}

SentenceHeadImpl::SentenceHeadImpl(const ModelOptions& c, int64_t labels) : config(c), num_labels(labels) {
  TUPE_CHECK(labels >= 1, "sentence head: num_labels must be >= 1, got " << labels);
  dense = register_module("dense", torch::nn::Linear(c.hidden_size, c.hidden_size));
  out = register_module("out", torch::nn::Linear(c.hidden_size, labels));
  dropout = register_module("dropout", Dropout(c.hidden_dropout));
  reset_parameters();
}

void SentenceHeadImpl::reset_parameters() {
  torch::NoGradGuard no_grad;
  for (auto& lin : {dense, out}) {
    torch::nn::init::normal_(lin->weight, 0.0, config.init_std);
    torch::nn::init::zeros_(lin->bias);
  }
}

at::Tensor SentenceHeadImpl::forward(const at::Tensor& hidden) {
  at::Tensor cls = hidden.select(1, 0);  // (B, d)
  return linear(out, dropout(at::tanh(linear(dense, cls))));
}

}  // namespace tupe::model
