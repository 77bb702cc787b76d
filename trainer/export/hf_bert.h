// tupe <-> HuggingFace `transformers` BertForMaskedLM / BertForSequenceClassification (BERT-A,
// post-LN only; FORMATS.md has no HF layout, so the names here follow transformers'
// modeling_bert.py):
//   encoder.embeddings.word.weight         -> bert.embeddings.word_embeddings.weight (V, d)
//   encoder.embeddings.position.weight     -> bert.embeddings.position_embeddings.weight (L_max, d)
//   encoder.embeddings.segment.weight      -> bert.embeddings.token_type_embeddings.weight (T, d)
//       (a model without segments gets one all-zero row: T = 1, every token type id 0)
//   encoder.embeddings.norm.{weight,bias}  -> bert.embeddings.LayerNorm.{weight,bias}
//   encoder.layers.<i>.attention.{query,key,value}.* -> bert.encoder.layer.<i>.attention.self.{query,key,value}.*
//   encoder.layers.<i>.attention.output.*  -> bert.encoder.layer.<i>.attention.output.dense.*
//   encoder.layers.<i>.attention_norm.*    -> bert.encoder.layer.<i>.attention.output.LayerNorm.*
//   encoder.layers.<i>.ffn_in.*            -> bert.encoder.layer.<i>.intermediate.dense.*
//   encoder.layers.<i>.ffn_out.*           -> bert.encoder.layer.<i>.output.dense.*
//   encoder.layers.<i>.ffn_norm.*          -> bert.encoder.layer.<i>.output.LayerNorm.*
//   mlm_head.dense.*                       -> cls.predictions.transform.dense.*
//   mlm_head.norm.*                        -> cls.predictions.transform.LayerNorm.*
//   mlm_head.bias                          -> cls.predictions.bias (V)
//   sentence_head.dense.*                  -> bert.pooler.dense.*   (a model of `tupe finetune`:
//   sentence_head.out.*                    -> classifier.*           BertForSequenceClassification)
// The decoder weight is tied to the word embedding and the decoder bias to
// cls.predictions.bias (transformers' _tied_weights_keys), so neither is stored.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/config.h"
#include "trainer/named_tensors.h"

namespace tupe::exporting {

/// Why `config` cannot become a BertForMaskedLM ("" when it can): only BERT-A (absolute
/// input positions, no positional logit term) with post-LN and erf-GELU is BERT.
std::string hf_bert_refusal(const model::ModelConfig& config);

/// The HF name of a tupe parameter name, or "" for a tensor BERT has no place for.
std::string hf_bert_name(const std::string& tupe_name);

/// The tensors of a BERT-A TupeBert (checkpoint names, any dtype) under HF names, float32,
/// contiguous: a pre-training checkpoint (mlm_head.*) or a fine-tuned model (sentence_head.*).
/// Throws tupe::Error "<where>: ..." when the config is refused, a tensor has no HF name, or
/// an expected tensor is missing.
trainer::NamedTensors to_hf_bert_tensors(const trainer::NamedTensors& tupe_tensors, const model::ModelConfig& config,
                                         const std::string& where);

/// config.json of transformers' BertConfig (model_type "bert") for BertForMaskedLM, or with
/// num_labels > 0 for BertForSequenceClassification (labels: names in id order, may be empty;
/// num_labels 1 = regression).
nlohmann::json hf_bert_config(const model::ModelConfig& config, int64_t num_labels = 0,
                              const std::vector<std::string>& labels = {});

}  // namespace tupe::exporting
