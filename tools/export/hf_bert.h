// tupe -> HuggingFace `transformers` BertForMaskedLM / BertForSequenceClassification (BERT-A,
// post-LN only): the tensors under transformers' names (model/hf_names.h holds the name map)
// and the config.json of BertConfig.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "checkpoint/named_tensors.h"
#include "model/config.h"

namespace tupe::exporting {

/// The tensors of a BERT-A TupeBert (checkpoint names, any dtype) under HF names, float32,
/// contiguous: a pre-training checkpoint (mlm_head.*) or a fine-tuned model (sentence_head.*).
/// Throws tupe::Error "<where>: ..." when the config is refused, a tensor has no HF name, or
/// an expected tensor is missing.
checkpoint::NamedTensors to_hf_bert_tensors(const checkpoint::NamedTensors& tupe_tensors,
                                            const model::ModelOptions& config, const std::string& where);

/// config.json of transformers' BertConfig (model_type "bert") for BertForMaskedLM, or with
/// num_labels > 0 for BertForSequenceClassification (labels: names in id order, may be empty;
/// num_labels 1 = regression).
nlohmann::json hf_bert_config(const model::ModelOptions& config, int64_t num_labels = 0,
                              const std::vector<std::string>& labels = {});

}  // namespace tupe::exporting
