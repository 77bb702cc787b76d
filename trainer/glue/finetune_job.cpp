#include "trainer/glue/finetune_job.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <filesystem>
#include <optional>

#include "common/error.h"
#include "common/log.h"
#include "dist/agreement.h"
#include "dist/context.h"
#include "dist/device.h"
#include "trainer/glue/pretrained.h"
#include "trainer/glue/protocol.h"
#include "trainer/glue/task_data.h"

namespace tupe::glue {

namespace {

/// Validates the sections and the task files; returns the tasks (`custom` receives the
/// [task] section's task, which the returned pointers may point to).
std::vector<const TaskSpec*> check_config(const FinetuneJobConfig& c, TaskSpec* custom) {
  const FinetuneConfig& cfg = c.finetune;
  cfg.validate();
  c.task.validate();
  if (c.task.enabled()) *custom = custom_task_spec(c.task);
  c.tokenizer.validate();
  c.dist.validate();
  TUPE_CHECK(c.dist.grad_reduce == dist::GradReduce::kSum,
             "dist.grad_reduce: average would divide by the world size twice: the loss is already divided by the "
             "global batch, so gradients are summed (use sum)");
  TUPE_CHECK(!cfg.checkpoint.empty(), "finetune.checkpoint: no pre-training checkpoint given");
  TUPE_CHECK(!c.tokenizer.vocab.empty(), "tokenizer.vocab: the pre-training vocabulary is required");
  const auto tasks = parse_task_list(cfg.tasks, "finetune.tasks", c.task.enabled() ? custom : nullptr);
  const bool glue = std::any_of(tasks.begin(), tasks.end(), [](const TaskSpec* t) { return !t->custom; });
  TUPE_CHECK(!glue || !cfg.data_dir.empty(), "finetune.data_dir: no GLUE folder given");
  check_task_files(tasks, cfg.data_dir, cfg.predict_test);
  return tasks;
}

/// The checkpoint's model config with the fine-tuning dropout, checked against the tokenizer.
model::ModelConfig finetune_model_config(const FinetuneConfig& cfg, const PretrainedEncoder& encoder,
                                         const data_pipeline::Tokenizer& tokenizer) {
  check_vocabulary(encoder.vocab_sha256, tokenizer, encoder.dir.string());
  model::ModelConfig m = encoder.config;
  m.hidden_dropout = cfg.hidden_dropout;
  m.attention_dropout = cfg.attention_dropout;
  TUPE_CHECK(tokenizer.vocab_size() <= m.vocab_size,
             "tokenizer.vocab: " << tokenizer.vocab_size() << " ids, more than the model's vocab_size " << m.vocab_size);
  return m;
}

/// Saves the reported run's weights of `task` with everything `tupe evaluate` needs.
std::filesystem::path save_reported_model(const FinetuneJobConfig& c, const TaskSpec& task, const TaskResult& result,
                                          const model::ModelConfig& model_config, const PretrainedEncoder& encoder,
                                          int64_t max_length, const trainer::NamedTensors& reported) {
  const RunRecord& run = result.runs.at(result.submission_run);
  KeyValues saved = c.effective;
  for (const auto& [k, v] : model::ModelConfig::fields().to_kv(model_config)) saved["model." + k] = v;
  saved["glue.task"] = task.name;
  saved["glue.max_length"] = std::to_string(max_length);
  saved["glue.num_outputs"] = std::to_string(task.num_outputs());
  saved["glue.lr"] = format_double(run.lr);
  saved["glue.seed"] = std::to_string(run.seed);
  saved["glue.selected_epoch"] = std::to_string(run.selected_epoch);
  saved["glue.pretrain_checkpoint"] = encoder.dir.string();
  return save_finetuned_model(std::filesystem::path(c.finetune.output_dir) / "models" / task.name, run.total_steps,
                              reported, saved, encoder.vocab_sha256);
}

/// The pre-trained encoder: rank 0 verifies the checkpoint's SHA-256s, the ranks agree on
/// its verdict, then the others read it without re-hashing.
PretrainedEncoder load_encoder_once_hashed(const dist::MpiEnv& env, const std::string& path) {
  std::optional<PretrainedEncoder> encoder;
  std::string error;
  if (env.rank() == 0) {
    try {
      encoder = load_pretrained_encoder(path);
    } catch (const Error& e) {
      error = e.what();
    }
  }
  error = dist::first_error(env, error);
  if (!error.empty()) throw AgreedError(error);  // every rank holds rank 0's message
  if (!encoder) encoder = load_pretrained_encoder(path, trainer::CheckpointStore::Hashes::kSkip);
  return std::move(*encoder);
}

}  // namespace

std::vector<TaskResult> run_finetune_job(const dist::MpiEnv& env, const FinetuneJobConfig& c,
                                         const std::function<void()>& on_start) {
  const FinetuneConfig& cfg = c.finetune;
  TaskSpec custom;  // the [task] section's task; outlives every pointer to it below
  const auto tasks = check_config(c, &custom);
  // Every rank runs the same config on the same task files (name, size).
  dist::require_agreement(env, "config check", dist::config_entries(c.effective));
  dist::require_agreement(env, "data check", describe_task_files(tasks, cfg.data_dir, cfg.predict_test));
  const bool rank0 = env.rank() == 0;
  if (cfg.threads > 0) at::set_num_threads(static_cast<int>(cfg.threads));

  // The encoder, tokenizer and device.
  const auto tokenizer = data_pipeline::make_tokenizer(c.tokenizer);
  const PretrainedEncoder encoder = load_encoder_once_hashed(env, cfg.checkpoint);
  const model::ModelConfig model_config = finetune_model_config(cfg, encoder, *tokenizer);
  const int64_t max_length = cfg.max_length > 0 ? cfg.max_length : model_config.max_positions;
  TUPE_CHECK(max_length <= model_config.max_positions,
             "finetune.max_length: " << max_length << " exceeds the checkpoint's model.max_positions "
                                     << model_config.max_positions);
  const c10::Device device = dist::resolve_device(env, cfg.device, "finetune.device");
  const bool bf16 = uses_bf16(cfg.precision, device.is_cuda());
  dist::DistContext dctx(env, c.dist, device);

  RunEnvironment renv;
  renv.dist = &dctx;
  renv.config = &cfg;
  renv.dist_options = c.dist;
  renv.model_config = model_config;
  renv.encoder = &encoder.encoder;
  renv.encoder_where = (encoder.dir / "model.safetensors").string();
  renv.inference.device = dctx.device();
  renv.inference.autocast_dtype = bf16 ? at::kBFloat16 : at::kFloat;
  renv.inference.pad_id = tokenizer->special_tokens().pad;
  renv.inference.segments = model_config.type_vocab_size > 0;
  renv.inference.batch_rows = cfg.eval_batch_size;

  ReportHeader header;
  header.model_name = cfg.model_name.empty() ? variant_name(model_config) : cfg.model_name;
  header.pretrain_steps = encoder.step;
  header.checkpoint = encoder.dir.string();
  header.world_size = env.world_size();
  header.device = dctx.device().str();
  header.precision = bf16 ? "bf16" : "fp32";
  header.config = c.effective;
  const auto lrs = cfg.learning_rate_list();
  const auto seeds = cfg.seed_list();
  if (rank0 && on_start) on_start();
  log::info("# fine-tuning " + header.model_name + " from " + encoder.dir.string() + " (step " +
            std::to_string(encoder.step) + ") on " + std::to_string(env.world_size()) + " rank(s), " + header.device +
            ", " + header.precision + "; " + std::to_string(lrs.size()) + " LR(s) x " + std::to_string(seeds.size()) +
            " seed(s); max length " + std::to_string(max_length));

  std::vector<TaskResult> results;
  for (const TaskSpec* task : tasks) {
    const TaskData data = load_task_data(*task, cfg, *tokenizer, max_length, cfg.predict_test,
                                         std::max(1, at::get_num_threads()));
    const int64_t epochs = cfg.epochs > 0 ? cfg.epochs : task->paper_epochs;
    int64_t skipped = 0;
    for (const auto& [split, n] : data.skipped_rows) skipped += n;
    log::info("# " + task->name + ": " + std::to_string(data.train.size()) + " of " +
              std::to_string(data.train_rows_in_file) + " train rows, " + std::to_string(epochs) + " epoch(s), " +
              std::to_string(data.dev.size()) + " dev split(s), " + std::to_string(data.test.size()) +
              " test split(s)" + (skipped ? ", " + std::to_string(skipped) + " bad rows skipped" : ""));
    trainer::NamedTensors reported;
    const bool keep = rank0 && cfg.save_model;
    TaskResult result = run_task(renv, data, lrs, seeds, epochs, keep, &reported);
    if (keep) result.model_dir = save_reported_model(c, *task, result, model_config, encoder, max_length, reported);
    results.push_back(std::move(result));
    if (rank0) write_outputs(cfg.output_dir, header, results);  // after every task: partial results survive
  }
  if (rank0)  // the job's result: rank 0 alone, whatever --log-ranks says
    log::info("\n" + results_markdown(header, results) + "\nwrote " + cfg.output_dir + "/results.json, " +
              cfg.output_dir + "/results.md" + (cfg.predict_test ? ", " + cfg.output_dir + "/submission/" : ""));
  return results;
}

}  // namespace tupe::glue
