// A checkpoint (trainer/checkpoint_store.h) as a ready model: the model config rebuilt from
// the saved "model.*" keys and a TupeBert holding the saved weights, in eval mode on the CPU.
// Either a pre-training checkpoint (encoder + MLM head) or a model saved by `tupe finetune`
// (encoder + sentence head, config keys "glue.*"; its MLM head stays at its init and is
// not part of the checkpoint). Shared by `tupe export` and `tupe analyze`.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>

#include "model/config.h"
#include "model/tupe_bert.h"
#include "trainer/checkpoint_store.h"

namespace tupe::exporting {

struct CheckpointModel {
  std::filesystem::path dir;            ///< the step_XXXXXXXX folder read
  model::ModelConfig config;            ///< from trainer_state.json "config" (model.* keys)
  trainer::CheckpointContents contents; ///< everything the checkpoint holds (tensors on the CPU)
  model::TupeBert net{nullptr};         ///< float32, eval mode, weights copied strictly
  bool has_mlm_head = true;             ///< mlm_head.* saved (pre-training checkpoint)
  int64_t num_labels = 0;               ///< sentence-head outputs (fine-tuned: >= 1; 1 = regression)
  std::string task;                     ///< "glue.task" of a fine-tuned model, else ""
};

/// `dir` is a step_XXXXXXXX folder, or a checkpoint.dir holding them (the newest whole one
/// is taken: trainer::CheckpointStore::resolve); the model config is read strictly
/// (model::model_config_from_saved: every model key must be saved). Throws ONE-line tupe::Error naming the folder or file and the cause
/// (no checkpoint, bad manifest, missing/unexpected/mis-shaped tensors). A checkpoint with
/// sentence_head.* tensors and no mlm_head.* is a fine-tuned model: the net gets a sentence
/// head of sentence_head.out.weight's rows, and every tensor but mlm_head.* must match.
CheckpointModel load_checkpoint_model(const std::filesystem::path& dir);

}  // namespace tupe::exporting
