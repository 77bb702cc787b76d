// The encoder of a pre-training checkpoint (trainer/checkpoint_store.h), loaded strictly for
// fine-tuning, and the fine-tuned models that `tupe finetune` saves and `tupe evaluate` reads.
//
// Rules (issue 5): the model config is the checkpoint's own (its "model.*" config keys;
// every key of ModelConfig must be there); the checkpoint's vocabulary hash must equal the
// tokenizer's; the encoder tensors must match the model built from that config exactly: a
// missing, unexpected or mis-shaped tensor -- which is also what a different positional
// variant looks like -- is ONE error listing every name. The MLM head's tensors
// (mlm_head.*) are expected and dropped; the sentence head starts fresh.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>

#include "common/config_fields.h"
#include "data_pipeline/tokenizer.h"
#include "model/config.h"
#include "model/tupe_bert.h"
#include "trainer/checkpoint_store.h"
#include "trainer/named_tensors.h"

namespace tupe::glue {

/// What fine-tuning takes from a pre-training checkpoint.
struct PretrainedEncoder {
  std::filesystem::path dir;    ///< the step_<N> folder read
  int64_t step = 0;             ///< pre-training steps of the checkpoint
  model::ModelConfig config;    ///< from its model.* keys
  trainer::NamedTensors encoder;  ///< every tensor but mlm_head.* (CPU), to match encoder.* exactly
  std::string vocab_sha256;     ///< the vocabulary it was trained with
  KeyValues saved_config;       ///< its whole effective config
};

/// Loads a checkpoint (trainer::CheckpointStore::resolve, then load with `hashes`; the model
/// config strictly, model::model_config_from_saved). Throws tupe::Error naming the file.
PretrainedEncoder load_pretrained_encoder(const std::filesystem::path& path,
                                          trainer::CheckpointStore::Hashes hashes = trainer::CheckpointStore::Hashes::kVerify);

/// Refuses a vocabulary other than the checkpoint's: throws tupe::Error "<where>: the
/// checkpoint was trained with vocabulary sha256 X, the tokenizer's is Y".
void check_vocabulary(const std::string& checkpoint_sha256, const data_pipeline::Tokenizer& tokenizer,
                      const std::string& where);

/// Copies `tensors` into the model's encoder.* parameters, strictly (copy_named_tensors):
/// ONE tupe::Error "<where>: N tensor name/shape/dtype mismatch(es): missing: ...; unexpected: ...".
void load_encoder_strict(model::TupeBertImpl& model, const trainer::NamedTensors& tensors, const std::string& where);

/// The parameters fine-tuning trains: every parameter except mlm_head.* (unused by the
/// sentence head), in registration order.
trainer::NamedTensors finetuned_parameters(model::TupeBertImpl& model);

/// A fine-tuned model as saved by `tupe finetune` (a checkpoint folder with the encoder and
/// sentence_head tensors; config keys "model.*" and "glue.*").
struct FinetunedModel {
  std::filesystem::path dir;
  model::ModelConfig config;    ///< with the fine-tuning dropout
  std::string task;             ///< "glue.task"
  int64_t max_length = 0;       ///< "glue.max_length": the length it was trained with
  trainer::NamedTensors tensors;///< encoder.* and sentence_head.*
  std::string vocab_sha256;
  KeyValues saved_config;
};

/// Saves `weights` (finetuned_parameters order) under <dir>/step_<steps>/ with CheckpointStore
/// (atomic). `config` holds "model.*" and "glue.*" keys (glue.task, glue.max_length, ...).
/// Returns the folder. Throws tupe::Error.
std::filesystem::path save_finetuned_model(const std::filesystem::path& dir, int64_t steps,
                                           const trainer::NamedTensors& weights, const KeyValues& config,
                                           const std::string& vocab_sha256);

/// Loads what save_finetuned_model wrote (dir or its step_<N> folder). Throws tupe::Error.
FinetunedModel load_finetuned_model(const std::filesystem::path& path);

}  // namespace tupe::glue
