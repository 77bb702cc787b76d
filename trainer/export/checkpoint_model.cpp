#include "trainer/export/checkpoint_model.h"

#include <ATen/ATen.h>

#include "common/error.h"
#include "trainer/named_tensors.h"

namespace tupe::exporting {


CheckpointModel load_checkpoint_model(const std::filesystem::path& dir) {
  namespace fs = std::filesystem;
  const fs::path step_dir = trainer::CheckpointStore::resolve(dir);
  CheckpointModel out;
  out.dir = step_dir;
  out.contents = trainer::CheckpointStore::load(step_dir);
  out.config = model::model_config_from_saved(out.contents.state.config, (step_dir / "trainer_state.json").string());
  const std::string where = (step_dir / "model.safetensors").string();
  out.has_mlm_head = false;
  for (const auto& [name, tensor] : out.contents.model) {
    if (name.rfind("mlm_head.", 0) == 0) out.has_mlm_head = true;
    if (name == "sentence_head.out.weight" && tensor.dim() == 2) out.num_labels = tensor.size(0);
  }
  TUPE_CHECK(out.has_mlm_head || out.num_labels > 0, where << ": neither an MLM head (mlm_head.*) nor a sentence head "
                                                             "(sentence_head.*): not a model of tupe pretrain or finetune");
  const auto task = out.contents.state.config.find("glue.task");
  if (task != out.contents.state.config.end()) out.task = task->second;
  out.net = model::TupeBert(out.config, out.num_labels);
  out.net->to(at::kFloat);
  trainer::NamedTensors targets;
  for (const auto& item : out.net->named_parameters())
    if (out.has_mlm_head || item.key().rfind("mlm_head.", 0) != 0) targets.emplace_back(item.key(), item.value());
  trainer::copy_named_tensors(targets, out.contents.model, where);
  out.net->eval();
  return out;
}

}  // namespace tupe::exporting
