// The names of TUPE-BERT's tensors in Hugging Face `transformers`, beside the model whose
// parameter names they map (model/tupe_bert.h). ONE table serves both directions: `tupe export`
// (tupe -> HF, hf_bert_name) and the import of a Hugging Face BERT folder (HF -> tupe,
// tupe_name_from_hf_bert; checkpoint/hf_import.h).
//
// BertForMaskedLM / BertForSequenceClassification (BERT-A, post-LN only; the names follow
// transformers' modeling_bert.py):
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
//
// tupe's own modeling code (`tupe export --format hf` for every variant; the Python classes
// in tools/export/hf_tupe/): the prefixes encoder. -> tupe., mlm_head. -> lm_head.,
// sentence_head. -> classifier. (sentence_head.out -> classifier.out). So the position table,
// its LayerNorm and U^Q, U^K of TUPE-A/R and BERT-A^d (one set of names for both):
//   encoder.positional.table.weight          -> tupe.positional.table.weight (rows, d)
//   encoder.positional.norm.{weight,bias}    -> tupe.positional.norm.{weight,bias} (d)
//   encoder.positional.{query,key}.weight    -> tupe.positional.{query,key}.weight (d, d): U^Q, U^K
//   encoder.positional.{query,key}.bias      -> tupe.positional.{query,key}.bias (d): c^Q, c^K
//   encoder.positional.relative_bias.weight  -> tupe.positional.relative_bias.weight (buckets + 1, H)
#pragma once
#include <string>

#include "model/config.h"

namespace tupe::model {

/// Why `config` cannot become a BertForMaskedLM ("" when it can): only BERT-A (absolute
/// input positions, no positional logit term, no position projections) with post-LN and
/// erf-GELU is BERT.
std::string hf_bert_refusal(const ModelOptions& config);

/// The transformers BERT name of a tupe parameter name, or "" for a tensor BERT has no place for.
std::string hf_bert_name(const std::string& tupe_name);

/// The tupe parameter name of a transformers BERT tensor name, or "" for a tensor tupe has no
/// place for (the NSP head cls.seq_relationship.*, the tied decoder cls.predictions.decoder.*,
/// the position_ids buffer, anything not BERT). Reads every layout of the same table:
/// BertForMaskedLM / BertForPreTraining / BertForSequenceClassification ("bert." prefix) and
/// BertModel (no prefix: "embeddings.word_embeddings.weight"), and the LayerNorm.gamma /
/// LayerNorm.beta of checkpoints written before transformers renamed them weight / bias.
std::string tupe_name_from_hf_bert(const std::string& hf_name);

/// The name in tupe's own Hugging Face modeling code; "" for a name outside encoder.*,
/// mlm_head.*, sentence_head.*.
std::string hf_tupe_name(const std::string& tupe_name);

}  // namespace tupe::model
