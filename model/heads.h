// Output heads (docs/model.md "The rest of the network").
// Shape legend: B batch, L sequence length, d model width, V vocabulary, M masked positions,
// C classes (1 for regression).
//   MLM head:       logits = LN(GELU(h W_t + b_t)) E^T + b_V     E: the word embedding (tied)
//   Sentence head:  y = (dropout(tanh(h_0 W_p + b_p))) W_c + b_c   on the first token
#pragma once
#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/pimpl.h>

#include "model/config.h"
#include "model/dropout.h"

namespace tupe::model {

class MlmHeadImpl : public torch::nn::Module {
 public:
  /// `word_embedding`: the (V, d) word embedding weight the decoder is tied to.
  MlmHeadImpl(const ModelOptions& config, at::Tensor word_embedding);
  void reset_parameters();

  /// hidden: (B, L, d); masked_positions: (M) int64 flat indices into B*L.
  /// Returns logits (M, V) computed at the masked positions only.
  at::Tensor forward(const at::Tensor& hidden, const at::Tensor& masked_positions);

  ModelOptions config;
  torch::nn::Linear dense{nullptr};  ///< d -> d
  torch::nn::LayerNorm norm{nullptr};
  at::Tensor bias;                   ///< (V) decoder bias
  at::Tensor decoder_weight;         ///< (V, d), the tied word embedding (not registered here)
};
TORCH_MODULE(MlmHead);

class SentenceHeadImpl : public torch::nn::Module {
 public:
  /// num_labels: classes for classification, 1 for regression (STS-B).
  SentenceHeadImpl(const ModelOptions& config, int64_t num_labels);
  void reset_parameters();
  /// hidden: (B, L, d). Returns (B, num_labels) from the first ([CLS]) token.
  at::Tensor forward(const at::Tensor& hidden);

  ModelOptions config;
  int64_t num_labels;
  torch::nn::Linear dense{nullptr};  ///< d -> d
  torch::nn::Linear out{nullptr};    ///< d -> num_labels
  Dropout dropout{nullptr};  ///< model/dropout.h (fast CPU path)
};
TORCH_MODULE(SentenceHead);

}  // namespace tupe::model
