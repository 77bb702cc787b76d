#include "model/embedding.h"

#include <ATen/ATen.h>
#include <torch/nn/init.h>

#include "common/error.h"

namespace tupe::model {

EmbeddingsImpl::EmbeddingsImpl(const ModelOptions& c) : config(c) {
  const int64_t d = c.hidden_size;
  word = register_module("word", torch::nn::Embedding(c.vocab_size, d));
  if (c.has_absolute_input_positions())
    position = register_module("position", torch::nn::Embedding(c.max_positions, d));
  if (c.type_vocab_size > 0) segment = register_module("segment", torch::nn::Embedding(c.type_vocab_size, d));
  norm = register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({d}).eps(c.layer_norm_eps)));
  dropout = register_module("dropout", Dropout(c.hidden_dropout));
  reset_parameters();
}

void EmbeddingsImpl::reset_parameters() {
  torch::NoGradGuard no_grad;
  torch::nn::init::normal_(word->weight, 0.0, config.init_std);
  if (position) torch::nn::init::normal_(position->weight, 0.0, config.init_std);
  if (segment) torch::nn::init::normal_(segment->weight, 0.0, config.init_std);
  torch::nn::init::ones_(norm->weight);
  torch::nn::init::zeros_(norm->bias);
}

at::Tensor EmbeddingsImpl::forward(const at::Tensor& input_ids, const at::Tensor& segment_ids) {
  const int64_t L = input_ids.size(1);
  TUPE_CHECK(L <= config.longest_sequence(),
             "model: sequence length " << L << " exceeds model.max_positions = " << config.max_positions);
  at::Tensor e = word(input_ids);  // (B, L, d)
  if (position) e = e + position->weight.narrow(0, 0, L).unsqueeze(0);
  if (segment_ids.defined()) {
    TUPE_CHECK(static_cast<bool>(segment), "model: segment ids given but model.type_vocab_size = 0");
    e = e + segment(segment_ids);
  } else if (segment) {
    e = e + segment->weight.select(0, 0);  // all-zero segment ids, as BERT does by default
  }
  return dropout(norm(e));
}

}  // namespace tupe::model
