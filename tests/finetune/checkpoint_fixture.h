// A pre-training checkpoint written the way the pre-training loop writes one
// (CheckpointStore; model.safetensors with every TupeBert parameter incl. mlm_head.*;
// trainer_state.json whose config holds the model.* keys and the vocabulary hash), from a
// freshly initialised TupeBert. Used by the strict-loading tests.
#pragma once
#include <ATen/ATen.h>

#include <filesystem>
#include <functional>
#include <string>

#include "checkpoint/checkpoint_store.h"
#include "model/tupe_bert.h"

namespace tupe::finetune::testing {

/// A tiny TUPE-R config over the 30,522-entry BERT vocabulary.
inline model::ModelOptions tiny_config() {
  model::ModelOptions c;
  c.vocab_size = 30522;
  c.hidden_size = 32;
  c.num_layers = 2;
  c.num_heads = 4;
  c.ffn_size = 64;
  c.max_positions = 128;
  c.type_vocab_size = 0;
  return c;
}

/// Writes step_<step>/ under `dir` from TupeBert(config) initialised with `seed`; `edit` may
/// change the tensors or the state before saving (renames, other variants, ...). Returns
/// the step folder.
inline std::filesystem::path write_pretraining_checkpoint(
    const std::filesystem::path& dir, const model::ModelOptions& config, const std::string& vocab_sha256,
    int64_t seed = 1, int64_t step = 100, const std::function<void(checkpoint::CheckpointContents&)>& edit = nullptr) {
  at::manual_seed(static_cast<uint64_t>(seed));
  model::TupeBert net(config);
  checkpoint::CheckpointContents contents;
  for (const auto& item : net->named_parameters()) contents.model.emplace_back(item.key(), item.value().detach());
  contents.optimizer.metadata = {{"optimizer", "adamw"}};
  contents.state.step = step;
  contents.state.scheduler_step = step;
  for (const auto& [k, v] : model::ModelOptions::fields().to_kv(config)) contents.state.config["model." + k] = v;
  contents.state.config["train.seed"] = std::to_string(seed);
  contents.state.vocab_sha256 = vocab_sha256;
  if (edit) edit(contents);
  checkpoint::CheckpointOptions options;
  options.dir = dir.string();
  options.keep_last = 0;
  options.keep_every = 0;
  checkpoint::CheckpointStore store(options);
  return store.save(contents);
}

}  // namespace tupe::finetune::testing
