// The Transformer encoder of TUPE-BERT: embeddings, the shared positional term (computed
// once per forward, docs/model.md), and num_layers encoder layers.
// Shape legend: B batch, L sequence length, d model width, H heads, F FFN width.
//   post-LN (BERT, default):  x = LN(x + Attn(x));  x = LN(x + FFN(x))
//   pre-LN (option):          x = x + Attn(LN(x));  x = x + FFN(LN(x));  final LN at the end
//   FFN(x) = GELU(x W_1 + b_1) W_2 + b_2, GELU with erf (BERT)
#pragma once
#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/pimpl.h>
#include <vector>

#include "model/attention.h"
#include "model/config.h"
#include "model/dropout.h"
#include "model/embedding.h"
#include "model/positional.h"

namespace tupe::model {

class EncoderLayerImpl : public torch::nn::Module {
 public:
  explicit EncoderLayerImpl(const ModelOptions& config);
  void reset_parameters();
  /// x: (B, L, d); positions: the encoder's PositionInputs (model/attention.h: the bias
  /// broadcastable to (B, H, L, L), BERT-A^d's pos_q, pos_k, RoPE's cos, sin). Returns (B, L, d).
  at::Tensor forward(const at::Tensor& x, const PositionInputs& positions);

  ModelOptions config;
  SelfAttention attention{nullptr};
  torch::nn::LayerNorm attention_norm{nullptr}, ffn_norm{nullptr};
  torch::nn::Linear ffn_in{nullptr};   ///< d -> F
  torch::nn::Linear ffn_out{nullptr};  ///< F -> d
  Dropout dropout{nullptr};  ///< model/dropout.h (fast CPU path)
};
TORCH_MODULE(EncoderLayer);

/// What Encoder::forward returns. The per-layer lists are filled only when asked for.
struct EncoderOutput {
  at::Tensor hidden;                          ///< (B, L, d) last layer output
  /// (B, H, L, L) or (B, 1, 1, L): positional + padding, in attention_compute_dtype (the
  /// autocast dtype under autocast): the one tensor every layer was given; undefined for
  /// BERT-A without padding.
  at::Tensor attention_bias;
  /// BERT-A^d only: (1, H, L, d_h) each, the projected positions LN(p) U^Q + c^Q and
  /// LN(p) U^K + c^K every layer adds to its q and k, in attention_compute_dtype; else undefined.
  at::Tensor position_query, position_key;
  /// RoPE only: (1, 1, L, d_h) each, the cos and sin of every layer's rotation of q and k, in
  /// attention_compute_dtype; else undefined.
  at::Tensor rope_cos, rope_sin;
  std::vector<at::Tensor> layer_inputs;       ///< num_layers x (B, L, d), with record_layers
  std::vector<at::Tensor> attention_logits;   ///< num_layers x (B, H, L, L), with record_layers
};

class EncoderImpl : public torch::nn::Module {
 public:
  explicit EncoderImpl(const ModelOptions& config);

  /// input_ids: (B, L) int64; attention_mask: (B, L) bool/int (1 = real token) or
  /// undefined (all real); segment_ids: (B, L) int64 or undefined.
  /// record_layers: also return each layer's input and pre-softmax logits (tests, analysis).
  /// The attention bias (and BERT-A^d's projected positions) are built and cast to the
  /// compute dtype ONCE here and the same tensors go to every layer, so autograd sums the layers' bias gradients (in that dtype) before
  /// a single backward through the cast and the positional term.
  /// Throws tupe::Error when L > config.longest_sequence() (max_positions for a learned table).
  EncoderOutput forward(const at::Tensor& input_ids, const at::Tensor& attention_mask = {},
                        const at::Tensor& segment_ids = {}, bool record_layers = false);

  /// The additive attention bias shared by all layers: positional term (H, L, L) plus
  /// -inf at padded keys; shape (B, H, L, L), or (B, 1, 1, L) for BERT-A, or undefined
  /// (BERT-A, no padding). dtype = the parameters' dtype.
  at::Tensor attention_bias(int64_t B, int64_t L, const at::Tensor& attention_mask);

  ModelOptions config;
  Embeddings embeddings{nullptr};
  PositionalTerm positional{nullptr};
  torch::nn::ModuleList layers{nullptr};
  torch::nn::LayerNorm final_norm{nullptr};  ///< pre-LN only
};
TORCH_MODULE(Encoder);

}  // namespace tupe::model
