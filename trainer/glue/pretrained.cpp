#include "trainer/glue/pretrained.h"

#include <sstream>

#include "common/error.h"
#include "trainer/checkpoint_store.h"

namespace tupe::glue {

namespace fs = std::filesystem;

namespace {

bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

}  // namespace

PretrainedEncoder load_pretrained_encoder(const fs::path& path, trainer::CheckpointStore::Hashes hashes) {
  PretrainedEncoder out;
  out.dir = trainer::CheckpointStore::resolve(path);
  trainer::CheckpointContents contents = trainer::CheckpointStore::load(out.dir, hashes);
  const std::string where = (out.dir / "trainer_state.json").string();
  out.step = contents.state.step;
  out.saved_config = contents.state.config;
  out.config = model::model_config_from_saved(contents.state.config, where);
  out.vocab_sha256 = contents.state.vocab_sha256;
  for (auto& [name, tensor] : contents.model)
    if (!starts_with(name, "mlm_head.")) out.encoder.emplace_back(name, tensor);
  return out;
}

void check_vocabulary(const std::string& checkpoint_sha256, const data_pipeline::Tokenizer& tokenizer,
                      const std::string& where) {
  TUPE_CHECK(!checkpoint_sha256.empty(), where << ": the checkpoint records no vocabulary sha256");
  TUPE_CHECK(checkpoint_sha256 == tokenizer.vocab_sha256(),
             where << ": the checkpoint was trained with vocabulary sha256 " << checkpoint_sha256
                   << ", the tokenizer's (tokenizer.vocab) is " << tokenizer.vocab_sha256()
                   << "; fine-tune with the pre-training vocabulary");
}

void load_encoder_strict(model::TupeBertImpl& model, const trainer::NamedTensors& tensors, const std::string& where) {
  trainer::NamedTensors targets;
  for (const auto& item : model.named_parameters())
    if (starts_with(item.key(), "encoder.")) targets.emplace_back(item.key(), item.value());
  trainer::copy_named_tensors(targets, tensors, where);
}

trainer::NamedTensors finetuned_parameters(model::TupeBertImpl& model) {
  trainer::NamedTensors out;
  for (const auto& item : model.named_parameters())
    if (!starts_with(item.key(), "mlm_head.")) out.emplace_back(item.key(), item.value());
  return out;
}

fs::path save_finetuned_model(const fs::path& dir, int64_t steps, const trainer::NamedTensors& weights,
                              const KeyValues& config, const std::string& vocab_sha256) {
  trainer::CheckpointOptions options;
  options.dir = dir.string();
  options.every_steps = 0;
  options.keep_last = 1;
  options.keep_every = 0;
  trainer::CheckpointStore store(options);
  trainer::CheckpointContents contents;
  contents.model = weights;
  contents.optimizer.metadata = {{"optimizer", "none"}, {"note", "fine-tuned model: no optimizer state"}};
  contents.state.step = steps;
  contents.state.scheduler_step = steps;
  contents.state.config = config;
  contents.state.vocab_sha256 = vocab_sha256;
  return store.save(contents);
}

FinetunedModel load_finetuned_model(const fs::path& path) {
  FinetunedModel out;
  out.dir = trainer::CheckpointStore::resolve(path);
  trainer::CheckpointContents contents = trainer::CheckpointStore::load(out.dir);
  const std::string where = (out.dir / "trainer_state.json").string();
  out.saved_config = contents.state.config;
  out.config = model::model_config_from_saved(contents.state.config, where);
  auto get = [&](const std::string& key) {
    auto it = contents.state.config.find(key);
    TUPE_CHECK(it != contents.state.config.end(),
               where << ": key 'config." << key << "' missing: not a fine-tuned model of tupe finetune");
    return it->second;
  };
  out.task = get("glue.task");
  out.max_length = parse_int("glue.max_length", get("glue.max_length"));
  out.vocab_sha256 = contents.state.vocab_sha256;
  out.tensors = std::move(contents.model);
  return out;
}

}  // namespace tupe::glue
