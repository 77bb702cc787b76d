// tupe <-> HuggingFace `transformers` BertForMaskedLM (BERT-A only; FORMATS.md has no HF
// layout, so the names here follow transformers' modeling_bert.py):
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
// The decoder weight is tied to the word embedding and the decoder bias to
// cls.predictions.bias (transformers' _tied_weights_keys), so neither is stored.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "model/config.h"
#include "trainer/named_tensors.h"

namespace tupe::exporting {

/// Why `config` cannot become a BertForMaskedLM ("" when it can): only BERT-A (absolute
/// input positions, no positional logit term) with post-LN and erf-GELU is BERT.
std::string hf_bert_refusal(const model::ModelConfig& config);

/// The HF name of a tupe parameter name, or "" for a tensor HF has no place for
/// (the sentence head).
std::string hf_bert_name(const std::string& tupe_name);

/// The tensors of a BERT-A TupeBert (checkpoint names, any dtype) under HF names, float32,
/// contiguous. Throws tupe::Error "<where>: ..." when the config is refused, a tensor has no
/// HF name, or an expected tensor is missing.
trainer::NamedTensors to_hf_bert_tensors(const trainer::NamedTensors& tupe_tensors, const model::ModelConfig& config,
                                         const std::string& where);

/// config.json of transformers' BertConfig for BertForMaskedLM (model_type "bert").
nlohmann::json hf_bert_config(const model::ModelConfig& config);

}  // namespace tupe::exporting
