// Input embeddings (docs/model.md "Eight variants", input column).
// Shape legend: B batch, L sequence length, d model width, V vocabulary size.
//   BERT-A/R: e = LN(word[x] + position[t] + segment[s]) then dropout
//   TUPE-A/R, BERT-A^d: e = LN(word[x] + segment[s]) then dropout (positions only in attention)
#pragma once
#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/pimpl.h>

#include "model/config.h"
#include "model/dropout.h"

namespace tupe::model {

class EmbeddingsImpl : public torch::nn::Module {
 public:
  explicit EmbeddingsImpl(const ModelOptions& config);
  void reset_parameters();

  /// input_ids: (B, L) int64 in [0, V); segment_ids: (B, L) int64 or undefined (all 0).
  /// Returns (B, L, d) in the parameters' dtype. Throws tupe::Error when segment ids are
  /// given to a model without a segment embedding.
  at::Tensor forward(const at::Tensor& input_ids, const at::Tensor& segment_ids = {});

  ModelOptions config;
  torch::nn::Embedding word{nullptr};      ///< (V, d); also the tied MLM decoder
  torch::nn::Embedding position{nullptr};  ///< (max_positions, d), BERT-A/R only (not BERT-A^d)
  torch::nn::Embedding segment{nullptr};   ///< (type_vocab_size, d) when type_vocab_size > 0
  torch::nn::LayerNorm norm{nullptr};      ///< LN over d
  Dropout dropout{nullptr};  ///< model/dropout.h (fast CPU path)
};
TORCH_MODULE(Embeddings);

}  // namespace tupe::model
