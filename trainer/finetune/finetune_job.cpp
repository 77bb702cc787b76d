// The fine-tuning job (finetune_job.h). run_finetune_job reads top to bottom:
//   check_config -> load_encoder_once_hashed -> setup_job -> per task: load_task_data,
//   run_task (protocol.h), save_reported_model, write_outputs -> the results table
// Each phase fills or uses fields of one FinetuneJob.
#include "trainer/finetune/finetune_job.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <optional>

#include "checkpoint/model_checkpoint.h"
#include "common/error.h"
#include "common/log.h"
#include "dist/small_collectives.h"
#include "dist/context.h"
#include "dist/device.h"
#include "dist/folder_lock_agreed.h"
#include "trainer/autocast.h"
#include "trainer/finetune/model_tokenizer.h"
#include "trainer/finetune/output_dir.h"
#include "trainer/finetune/protocol.h"
#include "trainer/finetune/saved_model.h"
#include "trainer/finetune/task_data.h"
#include "trainer/finetune/tasks/reader.h"

namespace tupe::finetune {

namespace {

/// One rank's fine-tuning job. Fields are declared in construction order.
struct FinetuneJob {
  FinetuneJob(const dist::MpiEnv& e, const FinetuneJobConfig& c) : env(e), c(c), cfg(c.finetune) {}
  const dist::MpiEnv& env;
  const FinetuneJobConfig& c;
  const FinetuneOptions& cfg;
  std::unique_ptr<FolderLock> folder_lock;  ///< output_dir's lock, held by rank 0 for the job's life
  // check_config
  TaskSpec custom;  ///< the [task] section's task; outlives every pointer to it in `tasks`
  std::vector<const TaskSpec*> tasks;
  // load_encoder_once_hashed, setup_job
  std::unique_ptr<data_pipeline::Tokenizer> tokenizer;
  data_pipeline::TokenizerOptions tokenizer_options;   ///< as resolved against the checkpoint (model_tokenizer.h)
  std::optional<checkpoint::ModelCheckpoint> encoder;  ///< the pre-training checkpoint
  model::ModelOptions model_config;                    ///< its config with the fine-tuning dropout
  int64_t max_length = 0;
  std::unique_ptr<dist::DistContext> context;
  RunEnvironment run_env;
  ReportHeader header;
  std::vector<TaskResult> results;
};

/// The [optimizer] keys the protocol sets in every run, and the [finetune] key that sets each.
constexpr std::pair<const char*, const char*> kProtocolKeys[] = {{"optimizer.lr", "finetune.learning_rates"},
                                                                 {"optimizer.warmup_steps", "finetune.warmup_ratio"},
                                                                 {"optimizer.total_steps", "finetune.epochs"}};

/// The protocol's keys: one typed on the command line is refused (it would be ignored); one
/// from a config file (a project file's pre-training values) yields, with one warning on
/// rank 0 for the job.
void check_protocol_keys(const KeyValues& given, bool rank_zero) {
  std::string yielded;
  for (const auto& [key, by] : kProtocolKeys) {
    const auto it = given.find(key);
    if (it == given.end()) continue;
    TUPE_CHECK(it->second != kGivenOnCommandLine,
               key << ": fine-tuning sets it in every run from " << by << " (the protocol); leave it out");
    yielded += (yielded.empty() ? "" : ", ") + std::string(key) + " (" + it->second + ")";
  }
  if (rank_zero && !yielded.empty())
    log::warn(yielded + " ignored: fine-tuning sets them from finetune.learning_rates, warmup_ratio and epochs");
}

/// Validates the sections and the task files; the ranks agree on the config and the files.
void check_config(FinetuneJob& job) {
  const FinetuneJobConfig& c = job.c;
  const FinetuneOptions& cfg = job.cfg;
  cfg.validate();
  c.task.validate();
  if (c.task.enabled()) job.custom = custom_task_spec(c.task);
  data_pipeline::TokenizerOptions::fields().check(c.tokenizer);  // the vocabulary may come from the checkpoint
  check_protocol_keys(c.given, job.env.rank() == 0);
  // The ranges only: warm-up and length are each run's (warmup_steps <= total_steps is
  // checked there), whatever a project file's pre-training values say.
  trainer::OptimizerOptions::fields().check(c.optimizer);
  c.precision.validate();
  c.dist.validate();
  job.env.set_startup_timeout(c.dist.startup_limit_s());
  TUPE_CHECK(!cfg.checkpoint.empty(), "finetune.checkpoint: no pre-training checkpoint given");
  job.tasks = parse_task_list(cfg.tasks, "finetune.tasks", c.task.enabled() ? &job.custom : nullptr);
  const bool glue = std::any_of(job.tasks.begin(), job.tasks.end(), [](const TaskSpec* t) { return !t->custom; });
  TUPE_CHECK(!glue || !cfg.data_dir.empty(), "finetune.data_dir: no GLUE folder given");
  check_task_files(job.tasks, cfg.data_dir, cfg.predict_test);
  // Every rank runs the same config on the same task files (name, size).
  dist::require_agreement(job.env, "config check", dist::config_entries(c.effective));
  dist::require_agreement(job.env, "data check", describe_task_files(job.tasks, cfg.data_dir, cfg.predict_test));
  // A selection split too small (or too large) for any task is refused now, not after the
  // tasks before it have trained: its sizes depend on the row counts alone.
  if (cfg.selection_fraction > 0)
    for (const TaskSpec* t : job.tasks) {
      const auto in_file =
          static_cast<int64_t>(read_split(*t, t->train, cfg.data_dir, ReadOptions{cfg.skip_bad_rows}).examples.size());
      selection_rows(t->name, cfg.train_rows > 0 ? std::min(cfg.train_rows, in_file) : in_file,
                     cfg.selection_fraction, cfg.data_seed);
    }
}

/// Rank 0 takes output_dir's lock (one job per folder: dist/folder_lock_agreed.h), then refuses
/// an output_dir holding a previous fine-tuning, or with finetune.overwrite removes that job's
/// outputs whole (output_dir.h); every rank holds its verdict.
void claim_job_output_dir(FinetuneJob& job) {
  job.folder_lock = dist::lock_output_folder(job.env, job.cfg.output_dir, "finetune.output_dir", "tupe finetune");
  std::string error;
  if (job.env.rank() == 0) {
    try {
      claim_output_dir(job.cfg.output_dir, job.cfg.overwrite);
    } catch (const Error& e) {
      error = e.what();
    }
  }
  error = dist::first_error(job.env, error, "output folder check");
  if (!error.empty()) throw AgreedError(error);
}

/// The pre-trained encoder: rank 0 verifies the checkpoint's SHA-256s, the ranks agree on
/// its verdict, then the others read it without re-hashing.
void load_encoder_once_hashed(FinetuneJob& job) {
  std::string error;
  if (job.env.rank() == 0) {
    try {
      job.encoder = checkpoint::read_model_checkpoint(job.cfg.checkpoint);
    } catch (const Error& e) {
      error = e.what();
    }
  }
  error = dist::first_error(job.env, error, "checkpoint read");
  if (!error.empty()) throw AgreedError(error);  // every rank holds rank 0's message
  // The step_<N> folder rank 0 verified (it may have skipped a damaged newer one).
  const std::string chosen =
      dist::broadcast_string(job.env, job.encoder ? job.encoder->dir.string() : "", "checkpoint read");
  if (!job.encoder) job.encoder = checkpoint::read_model_checkpoint(chosen, checkpoint::CheckpointStore::Hashes::kSkip);
}

/// The tokenizer checked against the checkpoint, the model config with the fine-tuning
/// dropout, the device and communicator, and what every run shares.
void setup_job(FinetuneJob& job) {
  const FinetuneOptions& cfg = job.cfg;
  if (cfg.threads > 0) at::set_num_threads(static_cast<int>(cfg.threads));
  load_encoder_once_hashed(job);
  const checkpoint::ModelCheckpoint& enc = *job.encoder;
  job.tokenizer_options = checkpoint_tokenizer_options(job.c.tokenizer, job.c.given, enc, job.env.rank() == 0);
  job.tokenizer = data_pipeline::make_tokenizer(job.tokenizer_options);
  checkpoint::check_vocabulary(enc.vocab_sha256(), job.tokenizer->vocab_sha256(), enc.dir.string());
  job.model_config = enc.config;
  job.model_config.hidden_dropout = cfg.hidden_dropout;
  job.model_config.attention_dropout = cfg.attention_dropout;
  TUPE_CHECK(job.tokenizer->vocab_size() <= job.model_config.vocab_size,
             "tokenizer.vocab: " << job.tokenizer->vocab_size() << " ids, more than the model's vocab_size "
                                 << job.model_config.vocab_size);
  job.max_length = cfg.max_length > 0 ? cfg.max_length : job.model_config.max_positions;
  TUPE_CHECK(job.max_length <= job.model_config.max_positions,
             "finetune.max_length: " << job.max_length << " exceeds the checkpoint's model.max_positions "
                                     << job.model_config.max_positions);
  const c10::Device device = dist::resolve_device(job.env, cfg.device, "finetune.device");
  trainer::PrecisionOptions precision = job.c.precision;
  precision.precision = trainer::resolve_precision(precision.precision, device.is_cuda(),
                                                   device.is_cuda() && dist::cuda_bf16_supported(device.index()));
  job.context = std::make_unique<dist::DistContext>(job.env, job.c.dist, device);
  RunEnvironment& r = job.run_env;
  r.dist = job.context.get();
  r.config = &cfg;
  r.optimizer = job.c.optimizer;
  r.precision = precision;
  r.dist_options = job.c.dist;
  r.model_config = job.model_config;
  r.encoder = &enc.contents.model;
  r.encoder_where = enc.weights_file();
  r.pooler = &enc.pooler;
  r.inference.device = job.context->device();
  r.inference.autocast_dtype = trainer::autocast_dtype(precision.precision);
  r.inference.pad_id = job.tokenizer->special_tokens().pad;
  r.inference.segments = job.model_config.type_vocab_size > 0;
  r.inference.batch_rows = cfg.eval_batch_size;
  job.header.model_name = cfg.model_name.empty() ? variant_name(job.model_config) : cfg.model_name;
  job.header.pretrain_steps = enc.step();
  job.header.checkpoint = enc.dir.string();
  job.header.world_size = job.env.world_size();
  job.header.device = job.context->device().str();
  job.header.precision = trainer::to_string(precision.precision);
  job.header.config = job.c.effective;
}

/// Saves the reported run's weights of `task` with everything `tupe evaluate` needs.
std::filesystem::path save_reported_model(const FinetuneJob& job, const TaskSpec& task, const TaskResult& result,
                                          const checkpoint::NamedTensors& reported) {
  const RunRecord& run = result.runs.at(result.submission_run);
  KeyValues saved = job.c.effective;
  for (const auto& [k, v] : model::ModelOptions::fields().to_kv(job.model_config)) saved["model." + k] = v;
  std::string labels;
  for (const auto& l : task.labels) labels += (labels.empty() ? "" : ",") + l;
  saved["glue.task"] = task.name;
  saved["glue.max_length"] = std::to_string(job.max_length);
  saved["glue.num_outputs"] = std::to_string(task.num_outputs());
  saved["glue.labels"] = labels;
  saved["glue.lr"] = format_double(run.lr);
  saved["glue.seed"] = std::to_string(run.seed);
  saved["glue.selected_epoch"] = std::to_string(run.selected_epoch);
  saved["glue.pretrain_checkpoint"] = job.encoder->dir.string();
  const data_pipeline::TokenizerOptions& t = job.tokenizer_options;
  saved["tokenizer.kind"] = data_pipeline::to_string(t.kind);  // what was used, not what was typed
  saved["tokenizer.lower_case"] = t.lower_case ? "true" : "false";
  saved["tokenizer.vocab"] = t.vocab;
  // Named by the step whose weights it holds: the selected epoch's last (not the run's last).
  const int64_t step = run.selected_epoch * run.steps_per_epoch;
  return save_finetuned_model(std::filesystem::path(job.cfg.output_dir) / "models" / task.name, step,
                              reported, saved, job.encoder->vocab_sha256(),
                              checkpoint::TokenizerRecord{data_pipeline::to_string(t.kind), t.lower_case, ""},
                              t.vocab);
}

/// "; cut to max length L: T of N train, D of M dev_matched, ..." when any example was
/// truncated (results.json's truncated_examples, said on the console too), else "".
std::string truncation_text(const TaskData& data) {
  std::string parts;
  auto add = [&](const EncodedSplit& split, const std::string& name) {
    if (split.truncated == 0) return;
    parts += (parts.empty() ? "" : ", ") + std::to_string(split.truncated) + " of " + std::to_string(split.size()) +
             " " + name;
  };
  add(data.train, "train");
  add(data.selection, "selection");
  for (const EncodedSplit& d : data.dev) add(d, d.name);
  for (const EncodedSplit& t : data.test) add(t, t.name);
  return parts.empty() ? "" : "; cut to max length " + std::to_string(data.max_length) + ": " + parts;
}

/// One task: its data, the protocol's runs, the reported model, the results files so far
/// (rewritten after every task: partial results survive a later failure).
void run_one_task(FinetuneJob& job, const TaskSpec& task, const std::vector<double>& lrs,
                  const std::vector<int64_t>& seeds) {
  const FinetuneOptions& cfg = job.cfg;
  const bool rank0 = job.env.rank() == 0;
  const TaskData data =
      load_task_data(task, cfg, *job.tokenizer, job.max_length, cfg.predict_test, std::max(1, at::get_num_threads()));
  const int64_t epochs = cfg.epochs > 0 ? cfg.epochs : task.paper_epochs;
  int64_t skipped = 0;
  for (const auto& [split, n] : data.skipped_rows) skipped += n;
  log::info("# " + task.name + ": " + std::to_string(data.train.size()) + " of " +
            std::to_string(data.train_rows_in_file) + " train rows" +
            (data.selection.size() > 0 ? " (" + std::to_string(data.selection.size()) + " held out for selection)" : "") +
            ", " + std::to_string(epochs) + " epoch(s), " +
            std::to_string(data.dev.size()) + " dev split(s), " + std::to_string(data.test.size()) + " test split(s)" +
            (skipped ? ", " + std::to_string(skipped) + " bad rows skipped" : "") + truncation_text(data));
  checkpoint::NamedTensors reported;
  const bool keep = rank0 && cfg.save_model;
  TaskResult result = run_task(job.run_env, data, lrs, seeds, epochs, keep, &reported);
  if (keep) result.model_dir = save_reported_model(job, task, result, reported);
  job.results.push_back(std::move(result));
  if (rank0) write_outputs(cfg.output_dir, job.header, job.results);
}

/// Everything after the output folder is claimed: set-up, the tasks, the results table.
std::vector<TaskResult> run_claimed(FinetuneJob& job, const std::function<void()>& on_start) {
  const dist::MpiEnv& env = job.env;
  const FinetuneJobConfig& config = job.c;
  const FinetuneOptions& cfg = job.cfg;
  setup_job(job);
  env.end_startup();  // the start-up's waits were bounded (dist/startup.h); the tasks are the work
  const auto lrs = cfg.learning_rate_list();
  const auto seeds = cfg.seed_list();
  if (env.rank() == 0 && on_start) on_start();
  log::info("# fine-tuning " + job.header.model_name + " from " + job.header.checkpoint + " (step " +
            std::to_string(job.header.pretrain_steps) + ") on " + std::to_string(env.world_size()) + " rank(s), " +
            job.header.device + ", " + job.header.precision + ", " +
            choice_word(config.optimizer.optimizer, trainer::kOptimizerKindWords) + " with a " +
            choice_word(config.optimizer.schedule, trainer::kScheduleKindWords) + " schedule; " +
            std::to_string(lrs.size()) + " LR(s) x " + std::to_string(seeds.size()) + " seed(s); max length " +
            std::to_string(job.max_length));
  for (const TaskSpec* task : job.tasks) run_one_task(job, *task, lrs, seeds);
  if (env.rank() == 0)  // the job's result: rank 0 alone, whatever --log-ranks says
    log::info("\n" + results_markdown(job.header, job.results) + "\nwrote " + cfg.output_dir + "/results.json, " +
              cfg.output_dir + "/results.md" + (cfg.predict_test ? ", " + cfg.output_dir + "/submission/" : ""));
  return std::move(job.results);
}

}  // namespace

std::vector<TaskResult> run_finetune_job(const dist::MpiEnv& env, const FinetuneJobConfig& config,
                                         const std::function<void()>& on_start) {
  FinetuneJob job(env, config);
  const FinetuneOptions& cfg = job.cfg;
  check_config(job);
  claim_job_output_dir(job);
  try {
    return run_claimed(job, on_start);
  } catch (...) {
    // A job that completed no task leaves nothing behind (effective_config.ini, a TensorBoard
    // folder, a half-saved model); after a complete task, the results so far stay.
    if (env.rank() == 0 && job.results.empty())
      for (const auto& p : remove_outputs(cfg.output_dir)) log::debug("removed " + p.string() + " (the job failed)");
    throw;
  }
}

}  // namespace tupe::finetune
