#include "tools/export/card_facts.h"

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "checkpoint/durable_io.h"
#include "checkpoint/trainer_state.h"
#include "common/config_fields.h"
#include "common/log.h"
#include "data_pipeline/dataset.h"
#include "data_pipeline/hdf5_util.h"
#include "data_pipeline/shard_format.h"

namespace tupe::exporting {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string key_of(const KeyValues& kv, const std::string& key) {
  const auto it = kv.find(key);
  return it == kv.end() ? "" : it->second;
}

int64_t integer_of(const KeyValues& kv, const std::string& key) {
  try {
    return std::stoll(key_of(kv, key));
  } catch (const std::exception&) {
    return 0;
  }
}

/// Sums the headers of the training shards data.train_shards names.
CorpusFacts read_corpus(const KeyValues& config) {
  CorpusFacts c;
  c.train_shards = key_of(config, "data.train_shards");
  c.validation_shards = key_of(config, "data.validation_shards");
  if (c.train_shards.empty()) {
    c.unread = "the checkpoint records no data.train_shards";
    return c;
  }
  try {
    const auto files = data_pipeline::list_shard_files(split_comma_list(c.train_shards), "train");
    if (files.empty()) {
      c.unread = "no training shard under data.train_shards";
      return c;
    }
    data_pipeline::h5::Lock lock;
    for (const auto& path : files) {
      data_pipeline::h5::Id file = data_pipeline::h5::open_file_readonly(path);
      const data_pipeline::ShardHeader h = data_pipeline::read_shard_header(path, file.get());
      if (c.files == 0) {
        c.max_seq_len = h.max_seq_len;
        c.packing = h.packing;
        c.documents = h.documents;
        c.tokenizer_kind = h.tokenizer_kind;
        c.lower_case = h.lower_case;
        c.command_line = h.command_line;
        c.run_id = h.run_id;
      } else if (h.command_line != c.command_line) {
        c.command_lines_differ = true;
      }
      ++c.files;
      c.sequences += h.num_sequences;
      c.tokens += h.num_tokens;
    }
  } catch (const std::exception& e) {
    CorpusFacts named;
    named.train_shards = c.train_shards;
    named.validation_shards = c.validation_shards;
    c = named;
    c.unread = std::string("not readable at export (") + e.what() + ")";
  }
  return c;
}

/// The metrics file of a run whose checkpoints are in `step_dir`'s parent.
fs::path find_metrics(const fs::path& step_dir, const KeyValues& config) {
  std::vector<fs::path> candidates;
  if (const std::string dir = key_of(config, "train.metrics_dir"); !dir.empty()) candidates.emplace_back(dir);
  candidates.push_back(step_dir.parent_path() / "metrics");
  if (const std::string dir = key_of(config, "checkpoint.dir"); !dir.empty()) candidates.push_back(fs::path(dir) / "metrics");
  std::error_code ec;
  for (const auto& d : candidates)
    if (fs::is_regular_file(d / "rank_0.jsonl", ec)) return d / "rank_0.jsonl";
  return {};
}

/// The last validation and training loss at or before the checkpoint's step.
void read_metrics(PretrainFacts& p, const fs::path& file) {
  p.metrics_file = file.string();
  std::ifstream in(file, std::ios::binary);
  std::string line;
  int64_t number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (line.empty()) continue;
    json r;
    try {
      r = json::parse(line);
    } catch (const std::exception&) {
      log::warn(file.string() + ": line " + std::to_string(number) + ": not JSON (a line cut short?); skipped for the model card");
      continue;
    }
    if (!r.is_object() || !r.contains("step") || !r["step"].is_number_integer()) continue;
    const int64_t step = r["step"].get<int64_t>();
    if (step > p.step) continue;  // logged past the checkpoint by a run that went on
    if (r.contains("validation_loss") && r["validation_loss"].is_number() && step >= p.validation_step) {
      p.validation_loss = r["validation_loss"].get<double>();
      p.validation_step = step;
    }
    if (r.contains("loss") && r["loss"].is_number() && step >= p.train_loss_step) {
      p.train_loss = r["loss"].get<double>();
      p.train_loss_step = step;
    }
  }
}

PretrainFacts read_pretrain(const fs::path& step_dir) {
  PretrainFacts p;
  const fs::path state_file = step_dir / "trainer_state.json";
  checkpoint::TrainerState state;
  try {
    state = checkpoint::trainer_state_from_json(checkpoint::read_file_bytes(state_file), state_file.string());
  } catch (const std::exception& e) {
    p.unread = e.what();
    return p;
  }
  p.state_file = state_file.string();
  const KeyValues& c = state.config;
  p.step = state.step;
  p.world_size = state.world_size;
  p.origin = state.origin;
  p.global_batch = integer_of(c, "data.global_batch_size");
  p.epoch = state.data.epoch;
  p.consumed_samples = state.data.consumed_samples;
  p.optimizer = key_of(c, "optimizer.optimizer");
  p.lr = key_of(c, "optimizer.lr");
  p.warmup_steps = key_of(c, "optimizer.warmup_steps");
  p.total_steps = key_of(c, "optimizer.total_steps");
  p.schedule = key_of(c, "optimizer.schedule");
  p.precision = key_of(c, "precision.precision");
  if (const fs::path metrics = find_metrics(step_dir, c); !metrics.empty()) read_metrics(p, metrics);
  p.corpus = read_corpus(c);
  return p;
}

/// Fills `f` from the entry of results.json `doc` for this model; false when it holds none.
bool read_task(FinetuneFacts& f, const checkpoint::ModelCheckpoint& ckpt, const fs::path& file, const json& doc) {
  if (!doc.is_object() || doc.value("format", "") != "tupe-glue-results" || !doc.contains("tasks") || !doc["tasks"].is_array())
    return false;
  for (const auto& t : doc["tasks"]) {
    if (!t.is_object() || t.value("task", "") != f.task) continue;
    // The same model: its model_dir ends in this folder's <TASK>/step_N.
    const fs::path dir = t.value("model_dir", "");
    if (dir.filename() != ckpt.dir.filename() || dir.parent_path().filename() != ckpt.dir.parent_path().filename()) continue;
    if (!t.contains("reported") || !t["reported"].is_object()) continue;
    f.results_file = file.string();
    f.primary_metric = t.value("primary_metric", "");
    f.epochs = t.value("epochs", int64_t{0});
    f.train_rows = t.value("train_rows", int64_t{0});
    f.best_lr = t.value("best_lr", 0.0);
    for (const auto& [split, metrics] : t["reported"].items()) {
      if (!metrics.is_object()) continue;
      std::vector<std::pair<std::string, double>> values;
      for (const auto& [name, v] : metrics.items())
        if (v.is_number()) values.emplace_back(name, v.get<double>());
      f.reported.emplace_back(split, values);
    }
    return true;
  }
  return false;
}

/// results.json's entry for this model's task, when its model_dir is this folder.
void read_results(FinetuneFacts& f, const checkpoint::ModelCheckpoint& ckpt) {
  std::vector<fs::path> candidates = {ckpt.dir.parent_path().parent_path().parent_path() / "results.json"};
  if (const std::string out = key_of(ckpt.saved_config(), "finetune.output_dir"); !out.empty())
    candidates.push_back(fs::path(out) / "results.json");
  std::error_code ec;
  for (const auto& file : candidates) {
    if (!fs::is_regular_file(file, ec)) continue;
    json doc;
    try {
      doc = json::parse(checkpoint::read_file_bytes(file));
      if (read_task(f, ckpt, file, doc)) return;
    } catch (const std::exception& e) {
      f.results_file.clear();
      f.reported.clear();
      log::warn(file.string() + ": " + e.what() + "; the model card carries no GLUE results");
      return;
    }
  }
}

}  // namespace

CardFacts gather_card_facts(const checkpoint::ModelCheckpoint& ckpt, const std::string& vocab,
                            std::optional<bool> lower_case) {
  CardFacts f;
  f.ckpt = &ckpt;
  f.variant = model::variant_name(ckpt.config);
  for (const auto& [name, t] : ckpt.contents.model) f.parameters += t.numel();
  f.vocab_file = vocab;
  f.lower_case = lower_case;
  if (const auto recorded = checkpoint::recorded_tokenizer(ckpt)) {
    f.tokenizer_kind = recorded->kind;
    if (!f.lower_case) f.lower_case = recorded->lower_case;
  }
  if (ckpt.fine_tuned()) {
    FinetuneFacts ft;
    const KeyValues& c = ckpt.saved_config();
    ft.task = ckpt.task;
    ft.labels = ckpt.labels;
    ft.lr = key_of(c, "glue.lr");
    ft.seed = key_of(c, "glue.seed");
    ft.selected_epoch = key_of(c, "glue.selected_epoch");
    ft.max_length = key_of(c, "glue.max_length");
    ft.pretrain_checkpoint = key_of(c, "glue.pretrain_checkpoint");
    read_results(ft, ckpt);
    if (!ft.pretrain_checkpoint.empty()) f.pretrain = read_pretrain(ft.pretrain_checkpoint);
    else f.pretrain.unread = "the model records no glue.pretrain_checkpoint";
    f.finetune = ft;
  } else {
    f.pretrain = read_pretrain(ckpt.dir);
  }
  if (f.tokenizer_kind.empty()) f.tokenizer_kind = f.pretrain.corpus.tokenizer_kind;
  return f;
}

}  // namespace tupe::exporting
