#include "trainer/finetune/evaluate_job.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <utility>
#include <vector>

#include "checkpoint/durable_io.h"
#include "checkpoint/model_checkpoint.h"
#include "common/error.h"
#include "common/log.h"
#include "dist/small_collectives.h"
#include "dist/context.h"
#include "dist/device.h"
#include "dist/heartbeat.h"
#include "trainer/autocast.h"
#include "trainer/finetune/evaluation.h"
#include "trainer/finetune/model_tokenizer.h"
#include "trainer/finetune/report.h"
#include "trainer/finetune/task_data.h"

namespace tupe::finetune {

namespace {

namespace fs = std::filesystem;

/// One rank's evaluation job. Fields are declared in construction order.
struct EvaluateJob {
  EvaluateJob(const dist::MpiEnv& e, const EvaluateJobConfig& c) : env(e), c(c), cfg(c.finetune) {}
  const dist::MpiEnv& env;
  const EvaluateJobConfig& c;
  const FinetuneOptions& cfg;
  // load_model
  std::unique_ptr<data_pipeline::Tokenizer> tokenizer;
  std::optional<checkpoint::ModelCheckpoint> saved;
  TaskSpec custom;  ///< storage of a custom task; `task` may point to it
  const TaskSpec* task = nullptr;
  int64_t max_length = 0;
  fs::path output_dir;  ///< finetune.output_dir when given, else next to the model (choose_output_dir)
  // setup_inference
  std::unique_ptr<dist::DistContext> context;
  model::TupeBert net{nullptr};
  InferenceSettings settings;
  trainer::Precision precision = trainer::Precision::kFp32;  ///< precision.precision resolved
  TaskData data;
  // evaluate_dev, predict_test
  nlohmann::json report;
  std::vector<std::pair<fs::path, std::string>> submissions;
};

void check_config(const EvaluateJob& job) {
  job.cfg.validate();
  job.c.precision.validate();
  data_pipeline::TokenizerOptions::fields().check(job.c.tokenizer);  // the vocabulary may come from the model
  job.c.dist.validate();
  job.env.set_startup_timeout(job.c.dist.startup_limit_s());
  TUPE_CHECK(!job.c.model.empty(), "evaluate: no model given (--model DIR)");
  job.c.task.validate();
  // Every rank evaluates the same model with the same config (the first differing key named).
  KeyValues effective = job.c.effective;
  effective["evaluate.model"] = job.c.model;
  dist::require_agreement(job.env, "config check", dist::config_entries(effective));
}

/// The saved model, checked against the tokenizer; its task (GLUE, or the custom task it
/// recorded or that [task] gives) and length.
void load_model(EvaluateJob& job) {
  if (job.cfg.threads > 0) at::set_num_threads(static_cast<int>(job.cfg.threads));
  job.saved = checkpoint::read_model_checkpoint(job.c.model);
  const checkpoint::ModelCheckpoint& saved = *job.saved;
  checkpoint::require_fine_tuned(saved);
  job.tokenizer = data_pipeline::make_tokenizer(
      checkpoint_tokenizer_options(job.c.tokenizer, job.c.given, saved, job.env.rank() == 0));
  checkpoint::check_vocabulary(saved.vocab_sha256(), job.tokenizer->vocab_sha256(), saved.dir.string());
  job.task = &saved_model_task(saved.task, saved.saved_config(), job.c.task,
                               (saved.dir / "trainer_state.json").string(), &job.custom);
  TUPE_CHECK(job.task->custom || !job.cfg.data_dir.empty(), "finetune.data_dir: no GLUE folder given");
  job.max_length = job.cfg.max_length > 0 ? job.cfg.max_length : saved.max_length;
  TUPE_CHECK(job.max_length >= 3 && job.max_length <= saved.config.max_positions,
             "finetune.max_length: " << job.max_length << " is outside [3, model.max_positions = "
                                     << saved.config.max_positions << "]");
  TUPE_CHECK(job.task->num_outputs() == saved.num_labels,
             saved.weights_file() << ": the sentence head has " << saved.num_labels << " output(s), task "
                                  << job.task->name << " needs " << job.task->num_outputs());
}

/// Where the report and submissions go: finetune.output_dir when given (command line or a
/// config file), else next to the model, <models/TASK>/evaluation/step_<N>/. A fine-tuning's
/// own folder (one holding results.json) is refused: its submission files are finetune's.
/// Names the step folder evaluated on the console.
void choose_output_dir(EvaluateJob& job) {
  const fs::path& model_dir = job.saved->dir;
  job.output_dir = job.c.given.count("finetune.output_dir")
                       ? fs::path(job.cfg.output_dir)
                       : model_dir.parent_path() / "evaluation" / model_dir.filename();
  std::error_code ec;
  TUPE_CHECK(!fs::exists(job.output_dir / "results.json", ec),
             "finetune.output_dir: " << job.output_dir.string()
                                     << " holds a fine-tuning's results (results.json), whose submission files "
                                        "evaluate would replace; leave output_dir out (evaluate then writes next "
                                        "to the model) or choose another folder");
  log::info("# evaluating " + model_dir.string() + " (" + job.task->name + ", step " +
            std::to_string(job.saved->step()) + ") into " + job.output_dir.string());
}

/// The device and communicator, the model on it in eval mode, the encoded splits.
void setup_inference(EvaluateJob& job) {
  const c10::Device device = dist::resolve_device(job.env, job.cfg.device, "finetune.device");
  job.precision = trainer::resolve_precision(job.c.precision.precision, device.is_cuda(),
                                             device.is_cuda() && dist::cuda_bf16_supported(device.index()));
  job.context = std::make_unique<dist::DistContext>(job.env, job.c.dist, device);
  job.net = checkpoint::build_model(*job.saved);
  job.net->to(job.context->device());
  job.net->eval();
  job.settings.device = job.context->device();
  job.settings.autocast_dtype = trainer::autocast_dtype(job.precision);
  job.settings.pad_id = job.tokenizer->special_tokens().pad;
  job.settings.segments = job.saved->config.type_vocab_size > 0;
  job.settings.batch_rows = job.cfg.eval_batch_size;
  job.data = load_eval_data(*job.task, job.cfg, *job.tokenizer, job.max_length, job.cfg.predict_test,
                            std::max(1, at::get_num_threads()));
}

/// The task's metrics on every dev split, into the report (and one log line each).
void evaluate_dev(EvaluateJob& job) {
  const TaskSpec& task = *job.task;
  nlohmann::json& report = job.report;
  report["format"] = "tupe-glue-evaluation";
  report["format_version"] = 1;
  report["task"] = task.name;
  report["model"] = job.saved->dir.string();
  report["max_length"] = job.max_length;
  report["world_size"] = job.env.world_size();
  report["precision"] = trainer::to_string(job.precision);
  report["skipped_rows"] = job.data.skipped_rows;
  report["dev"] = nlohmann::json::object();
  for (const EncodedSplit& split : job.data.dev) {
    const auto outputs = predict_outputs(*job.net, split, job.context->comm(), job.settings);
    nlohmann::json m = nlohmann::json::object();
    for (const auto& [name, value] : score_predictions(task, to_predictions(task, outputs), split)) {
      m[name] = value;
      char line[256];
      std::snprintf(line, sizeof line, "%s %s: %s %.4f", task.name.c_str(), split.name.c_str(), name.c_str(), value);
      log::info(line);
    }
    report["dev"][split.name] = m;
  }
}

/// The submission text of every test split.
void predict_test(EvaluateJob& job) {
  for (size_t s = 0; s < job.data.test.size(); ++s) {
    const auto outputs = predict_outputs(*job.net, job.data.test[s], job.context->comm(), job.settings);
    job.submissions.emplace_back(job.output_dir / "submission" / job.data.test_specs[s]->submission,
                                 submission_text(*job.task, job.data.test[s].index, to_predictions(*job.task, outputs)));
  }
}

/// Rank 0 writes the submission files and evaluation_<TASK>.json (each atomically).
void write_outputs(EvaluateJob& job) {
  if (job.env.rank() != 0) return;
  std::error_code ec;
  const fs::path submission_dir = job.output_dir / "submission";
  fs::create_directories(submission_dir, ec);
  TUPE_CHECK(!ec, submission_dir.string() << ": cannot create: " << ec.message());
  job.report["submission_files"] = nlohmann::json::array();
  for (const auto& [path, text] : job.submissions) {
    checkpoint::write_file_atomic(path, text);
    job.report["submission_files"].push_back(path.string());
    log::info("wrote " + path.string());
  }
  const fs::path json_path = job.output_dir / ("evaluation_" + job.task->name + ".json");
  checkpoint::write_file_atomic(json_path, job.report.dump(2) + "\n");
  log::info("wrote " + json_path.string());
}

}  // namespace

void run_evaluate_job(const dist::MpiEnv& env, const EvaluateJobConfig& config) {
  EvaluateJob job(env, config);
  check_config(job);
  const auto heartbeat = dist::start_heartbeat(env, "tupe evaluate");  // past start-up: a lost node ends the job
  heartbeat->set_activity("evaluating");
  load_model(job);
  choose_output_dir(job);
  setup_inference(job);
  env.end_startup();  // the start-up's waits were bounded (dist/startup.h)
  evaluate_dev(job);
  predict_test(job);
  write_outputs(job);
}

}  // namespace tupe::finetune
