// The model `tupe finetune` saves for each task (the reported run's weights) and the
// parameters fine-tuning trains. The saved folder is a checkpoint (docs/formats.md
// "Fine-tuned models"), read back by checkpoint/model_checkpoint.h.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>

#include "checkpoint/named_tensors.h"
#include "checkpoint/trainer_state.h"
#include "common/config_fields.h"
#include "model/tupe_bert.h"

namespace tupe::finetune {

/// The parameters fine-tuning trains: every parameter except mlm_head.* (unused by the
/// sentence head), in registration order.
checkpoint::NamedTensors finetuned_parameters(model::TupeBertImpl& model);

/// Saves `weights` (finetuned_parameters order) under <dir>/step_<steps>/ with the checkpoint
/// store (atomic). `config` holds "model.*" and "glue.*" keys (glue.task, glue.max_length,
/// glue.labels, ...). The folder carries the vocabulary file `vocab` (its SHA-256 must be
/// `vocab_sha256`) with `tokenizer` as its record (vocab_file filled in here), so that `tupe
/// evaluate` needs no --tokenizer.vocab. Returns the folder. Throws tupe::Error.
std::filesystem::path save_finetuned_model(const std::filesystem::path& dir, int64_t steps,
                                           const checkpoint::NamedTensors& weights, const KeyValues& config,
                                           const std::string& vocab_sha256, checkpoint::TokenizerRecord tokenizer,
                                           const std::filesystem::path& vocab);

}  // namespace tupe::finetune
