#include "checkpoint/model_checkpoint.h"

#include <ATen/ATen.h>

#include "checkpoint/hf_import.h"
#include "common/error.h"
#include "common/log.h"

namespace tupe::checkpoint {

namespace {

bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

std::string saved_value(const KeyValues& config, const std::string& key) {
  const auto it = config.find(key);
  return it == config.end() ? std::string() : it->second;
}

/// A Hugging Face BERT folder as a checkpoint at step 0 (model_checkpoint.h).
ModelCheckpoint from_hf_folder(const std::filesystem::path& path) {
  HfBertFolder hf = read_hf_bert_folder(path);
  ModelCheckpoint out;
  out.dir = path;
  out.source_format = "hf-bert";
  out.hf_architecture = hf.architecture;
  out.config = hf.config;
  out.has_mlm_head = hf.has_mlm_head();
  out.pooler = std::move(hf.pooler);
  out.left_out = std::move(hf.left_out);
  out.contents.model = std::move(hf.tensors);
  TrainerState& s = out.contents.state;
  s.build.clear();  // no tupe wrote it
  s.world_size = 1;
  s.vocab_sha256 = hf.vocab_sha256;
  s.tokenizer = hf.tokenizer;
  for (const auto& [k, v] : model::ModelOptions::fields().to_kv(hf.config)) s.config["model." + k] = v;
  s.config["tokenizer.kind"] = hf.tokenizer.kind;
  s.config["tokenizer.lower_case"] = hf.tokenizer.lower_case ? "true" : "false";
  s.config["tokenizer.vocab"] = hf.vocab_path.string();
  if (hf.vocab_path != path / hf.tokenizer.vocab_file) out.vocab_location = hf.vocab_path;
  return out;
}

}  // namespace

ModelCheckpoint read_model_checkpoint(const std::filesystem::path& path, CheckpointStore::Hashes hashes) {
  if (looks_like_hf_folder(path)) return from_hf_folder(path);
  ModelCheckpoint out;
  const std::filesystem::path chosen = CheckpointStore::resolve(path);  // throws for no checkpoint at all
  if (CheckpointStore::is_checkpoint_folder(path)) {
    out.dir = chosen;
    out.contents = CheckpointStore::load(out.dir, hashes);
  } else {  // a folder of checkpoints: the newest that loads, each damaged newer one named
    std::vector<std::string> skipped;
    std::optional<LoadedCheckpoint> loaded = CheckpointStore::load_latest(path, &skipped, hashes);
    TUPE_CHECK(loaded, path.string() << ": none of the " << skipped.size()
                                     << " checkpoint(s) loads (newest: " << skipped.front() << ")");
    for (const auto& why : skipped) log::warn("skipping a damaged checkpoint: " + why);
    out.dir = loaded->dir;
    out.contents = std::move(loaded->contents);
  }
  const KeyValues& saved = out.contents.state.config;
  out.config = model::model_config_from_saved(saved, (out.dir / "trainer_state.json").string());
  for (const auto& [name, tensor] : out.contents.model) {
    if (starts_with(name, "mlm_head.")) out.has_mlm_head = true;
    if (name == "sentence_head.out.weight" && tensor.dim() == 2) out.num_labels = tensor.size(0);
  }
  TUPE_CHECK(out.has_mlm_head || out.num_labels > 0,
             out.weights_file() << ": neither an MLM head (mlm_head.*) nor a sentence head "
                                   "(sentence_head.*): not a model of tupe pretrain or finetune");
  out.task = saved_value(saved, "glue.task");
  const std::string max_length = saved_value(saved, "glue.max_length");
  if (!max_length.empty()) out.max_length = parse_int("glue.max_length", max_length);
  out.labels = split_comma_list(saved_value(saved, "glue.labels"));
  return out;
}

void require_fine_tuned(const ModelCheckpoint& ckpt) {
  const std::string where = (ckpt.dir / "trainer_state.json").string();
  for (const char* key : {"glue.task", "glue.max_length"})
    TUPE_CHECK(ckpt.saved_config().count(key),
               where << ": key 'config." << key << "' missing: not a fine-tuned model of tupe finetune");
  TUPE_CHECK(ckpt.num_labels > 0 && !ckpt.has_mlm_head,
             ckpt.weights_file() << ": no sentence head: not a fine-tuned model of tupe finetune");
}

model::TupeBert build_model(const ModelCheckpoint& ckpt) { return build_model(ckpt, ckpt.config); }

model::TupeBert build_model(const ModelCheckpoint& ckpt, const model::ModelOptions& config) {
  TUPE_CHECK(ckpt.has_mlm_head || ckpt.num_labels > 0,
             ckpt.dir.string() << ": a Hugging Face " << ckpt.hf_architecture
                               << " without an MLM head (cls.predictions.*): nothing to predict, analyse or export "
                                  "with; fine-tune it (tupe finetune --finetune.checkpoint) or continue pre-training "
                                  "from it (tupe pretrain --init-from), which gives it a head");
  model::TupeBert net(config, ckpt.num_labels);
  net->to(at::kFloat);
  NamedTensors targets;
  for (const auto& item : net->named_parameters())
    if (ckpt.has_mlm_head || !starts_with(item.key(), "mlm_head.")) targets.emplace_back(item.key(), item.value());
  copy_named_tensors(targets, ckpt.contents.model, ckpt.weights_file());
  net->eval();
  return net;
}

void load_encoder(model::TupeBertImpl& model, const NamedTensors& saved, const std::string& where) {
  NamedTensors targets, source;
  for (const auto& item : model.named_parameters())
    if (starts_with(item.key(), "encoder.")) targets.emplace_back(item.key(), item.value());
  for (const auto& [name, t] : saved)
    if (!starts_with(name, "mlm_head.")) source.emplace_back(name, t);
  copy_named_tensors(targets, source, where);
}

std::optional<TokenizerRecord> recorded_tokenizer(const ModelCheckpoint& ckpt, std::string* source) {
  const std::string state_file = (ckpt.dir / "trainer_state.json").string();
  if (ckpt.contents.state.tokenizer) {
    if (source) *source = state_file + " (tokenizer record)";
    return ckpt.contents.state.tokenizer;
  }
  const std::string kind = saved_value(ckpt.saved_config(), "tokenizer.kind");
  const std::string lower = saved_value(ckpt.saved_config(), "tokenizer.lower_case");
  if ((kind != "wordpiece" && kind != "sentencepiece") || (lower != "true" && lower != "false")) return std::nullopt;
  if (source) *source = state_file + " (config keys tokenizer.kind, tokenizer.lower_case)";
  return TokenizerRecord{kind, lower == "true", ""};
}

void check_vocabulary(const std::string& checkpoint_sha256, const std::string& tokenizer_sha256,
                      const std::string& where) {
  TUPE_CHECK(!checkpoint_sha256.empty(), where << ": the checkpoint records no vocabulary sha256");
  TUPE_CHECK(checkpoint_sha256 == tokenizer_sha256,
             where << ": the checkpoint was trained with vocabulary sha256 " << checkpoint_sha256
                   << ", the tokenizer's (tokenizer.vocab) is " << tokenizer_sha256
                   << "; fine-tune with the pre-training vocabulary");
}

}  // namespace tupe::checkpoint
