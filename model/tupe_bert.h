// TUPE-BERT: the encoder with its MLM head (pre-training) and an optional sentence head
// (GLUE fine-tuning). Parameter names (named_parameters) are the checkpoint's tensor names:
//   encoder.embeddings.{word,position,segment}.weight, encoder.embeddings.norm.{weight,bias}
//   encoder.positional.{table.weight, norm.*, query.*, key.*, relative_bias.weight}
//   encoder.layers.<i>.attention.{query,key,value,output}.{weight,bias}
//   encoder.layers.<i>.{attention_norm,ffn_in,ffn_out,ffn_norm}.{weight,bias}
//   encoder.final_norm.* (pre-LN), mlm_head.{dense.*, norm.*, bias},
//   sentence_head.{dense,out}.{weight,bias}
// The MLM decoder weight is encoder.embeddings.word.weight (tied, stored once).
#pragma once
#include <ATen/core/Tensor.h>
#include <string>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>
#include <utility>
#include <vector>

#include "model/config.h"
#include "model/encoder.h"
#include "model/heads.h"

namespace tupe::model {

class TupeBertImpl : public torch::nn::Module {
 public:
  /// num_labels = 0: no sentence head (pre-training); >= 1 adds one (fine-tuning).
  explicit TupeBertImpl(const ModelOptions& config, int64_t num_labels = 0);

  /// MLM logits at the masked positions. input_ids, attention_mask, segment_ids: (B, L);
  /// masked_positions: (M) int64 flat indices into B*L. Returns (M, V).
  at::Tensor mlm_logits(const at::Tensor& input_ids, const at::Tensor& attention_mask,
                        const at::Tensor& segment_ids, const at::Tensor& masked_positions);

  /// Sentence-head outputs (B, num_labels). Throws tupe::Error without a sentence head.
  at::Tensor sentence_logits(const at::Tensor& input_ids, const at::Tensor& attention_mask,
                             const at::Tensor& segment_ids);

  ModelOptions config;
  Encoder encoder{nullptr};
  MlmHead mlm_head{nullptr};
  SentenceHead sentence_head{nullptr};
};
TORCH_MODULE(TupeBert);

/// One row of the parameter table of `tupe info`.
struct ParamGroup {
  std::string name;  ///< e.g. "embeddings", "positional term", "layer 0", "MLM head"
  int64_t numel = 0;
};

/// Parameter counts by group; the last row is the total of unique parameters (the tied
/// decoder counted once). Groups follow the name prefixes above.
std::vector<ParamGroup> parameter_table(TupeBertImpl& model);

/// Total number of parameter elements (unique tensors).
int64_t count_parameters(torch::nn::Module& module);

}  // namespace tupe::model
