// A pre-training checkpoint (trainer/checkpoint_store.h) as a ready model: the model config
// rebuilt from the saved "model.*" keys and a TupeBert (no sentence head) holding the saved
// weights, in eval mode on the CPU. Shared by `tupe export` and `tupe analyze`.
#pragma once
#include <filesystem>

#include "model/config.h"
#include "model/tupe_bert.h"
#include "trainer/checkpoint_store.h"

namespace tupe::exporting {

struct CheckpointModel {
  std::filesystem::path dir;            ///< the step_XXXXXXXX folder read
  model::ModelConfig config;            ///< from trainer_state.json "config" (model.* keys)
  trainer::CheckpointContents contents; ///< everything the checkpoint holds (tensors on the CPU)
  model::TupeBert net{nullptr};         ///< float32, eval mode, weights copied strictly
};

/// The model config of a checkpoint's saved effective config (keys "model.<field>").
/// Throws tupe::Error "<where>: ..." for an unknown or bad model key, or when none is present.
model::ModelConfig model_config_from_state(const KeyValues& config, const std::string& where);

/// `dir` is a step_XXXXXXXX folder, or a checkpoint.dir holding them (the newest whole one
/// is taken). Throws ONE-line tupe::Error naming the folder or file and the cause
/// (no checkpoint, bad manifest, missing/unexpected/mis-shaped tensors).
CheckpointModel load_checkpoint_model(const std::filesystem::path& dir);

}  // namespace tupe::exporting
