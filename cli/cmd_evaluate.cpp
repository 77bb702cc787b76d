// tupe evaluate: a fine-tuned model saved by `tupe finetune` (models/<TASK>/) on its task's
// dev split(s) -- the GLUE metrics -- and its test split(s) -- the benchmark's submission
// files. Data-parallel under mpirun (the result does not depend on the rank count).
// Usage:
//   [mpirun -np W] tupe evaluate --model OUT/models/SST-2 --finetune.data_dir GLUE
//       --tokenizer.vocab vocab.txt [--finetune.output_dir DIR] [--skip-bad-rows]
// Writes <finetune.output_dir>/evaluation_<TASK>.json and submission/<X>.tsv.
#include <ATen/Parallel.h>
#include <c10/core/Device.h>

#include <boost/program_options/options_description.hpp>
#include <boost/program_options/value_semantic.hpp>
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/config_cli.h"
#include "cli/rank_guard.h"
#include "common/error.h"
#include "common/log.h"
#include "data_pipeline/text/tokenizer_factory.h"
#include "dist/agreement.h"
#include "dist/context.h"
#include "dist/device.h"
#include "dist/mpi_env.h"
#include "trainer/durable_io.h"
#include "trainer/glue/custom_task.h"
#include "trainer/glue/evaluation.h"
#include "trainer/glue/pretrained.h"
#include "trainer/glue/report.h"
#include "trainer/glue/task_data.h"

namespace po = boost::program_options;

namespace tupe::cli {

namespace {

int evaluate_job(const dist::MpiEnv& env, int argc, char** argv) {
  glue::FinetuneConfig cfg;
  data_pipeline::TokenizerOptions tok_options;
  dist::DistOptions dist_options;
  glue::CustomTaskConfig task_config;
  std::string model_path;
  ConfigCli cli("evaluate",
                "Evaluates a model fine-tuned by `tupe finetune` (its models/<TASK> folder) on the task's dev\n"
                "split(s) and writes the submission file(s) of its test split(s). Reads data_dir, output_dir,\n"
                "max_length (0 = the length it was trained with), eval_batch_size, device, precision, threads,\n"
                "skip_bad_rows and predict_test from [finetune]. A custom task's files: the [task] section given\n"
                "here when its name is the model's task, else the one the model recorded.");
  cli.section("finetune", glue::FinetuneConfig::fields(), cfg);
  cli.section("task", glue::CustomTaskConfig::fields(), task_config);
  cli.section("tokenizer", data_pipeline::TokenizerOptions::fields(), tok_options);
  cli.section("dist", dist::DistOptions::fields(), dist_options);
  cli.options().add_options()("model", po::value<std::string>(&model_path),
                              "fine-tuned model: <finetune output_dir>/models/<TASK> or one of its step_<N> folders")(
      "skip-bad-rows", "skip (and count) malformed task-file rows (= --finetune.skip_bad_rows true)");
  if (!cli.parse(argc, argv)) return 0;
  if (cli.vm().count("skip-bad-rows")) cfg.skip_bad_rows = true;
  cfg.validate();
  tok_options.validate();
  dist_options.validate();
  TUPE_CHECK(!model_path.empty(), "evaluate: no model given (--model DIR)");
  task_config.validate();
  TUPE_CHECK(!tok_options.vocab.empty(), "tokenizer.vocab: the model's vocabulary is required");
  // Every rank evaluates the same model with the same config (the first differing key named).
  KeyValues effective = cli.effective();
  effective["evaluate.model"] = model_path;
  dist::require_agreement(env, "config check", dist::config_entries(effective));

  const int rank = env.rank();
  if (cfg.threads > 0) at::set_num_threads(static_cast<int>(cfg.threads));
  auto tokenizer = data_pipeline::make_tokenizer(tok_options);
  const glue::FinetunedModel saved = glue::load_finetuned_model(model_path);
  glue::check_vocabulary(saved.vocab_sha256, *tokenizer, saved.dir.string());
  glue::TaskSpec custom;
  const glue::TaskSpec& task = glue::saved_model_task(saved.task, saved.saved_config, task_config,
                                                      (saved.dir / "trainer_state.json").string(), &custom);
  TUPE_CHECK(task.custom || !cfg.data_dir.empty(), "finetune.data_dir: no GLUE folder given");
  const int64_t max_length = cfg.max_length > 0 ? cfg.max_length : saved.max_length;
  TUPE_CHECK(max_length >= 3 && max_length <= saved.config.max_positions,
             "finetune.max_length: " << max_length << " is outside [3, model.max_positions = "
                                     << saved.config.max_positions << "]");

  model::TupeBert net(saved.config, task.num_outputs());
  trainer::copy_named_tensors(glue::finetuned_parameters(*net), saved.tensors,
                              (saved.dir / "model.safetensors").string());
  const c10::Device device = dist::resolve_device(env, cfg.device, "finetune.device");
  const bool bf16 = glue::uses_bf16(cfg.precision, device.is_cuda());
  dist::DistContext dctx(env, dist_options, device);
  net->to(dctx.device());
  net->eval();

  glue::InferenceSettings settings;
  settings.device = dctx.device();
  settings.autocast_dtype = bf16 ? at::kBFloat16 : at::kFloat;
  settings.pad_id = tokenizer->special_tokens().pad;
  settings.segments = saved.config.type_vocab_size > 0;
  settings.batch_rows = cfg.eval_batch_size;
  const glue::TaskData data =
      glue::load_eval_data(task, cfg, *tokenizer, max_length, cfg.predict_test, std::max(1, at::get_num_threads()));

  nlohmann::json report;
  report["format"] = "tupe-glue-evaluation";
  report["format_version"] = 1;
  report["task"] = task.name;
  report["model"] = saved.dir.string();
  report["max_length"] = max_length;
  report["world_size"] = env.world_size();
  report["precision"] = bf16 ? "bf16" : "fp32";
  report["skipped_rows"] = data.skipped_rows;
  report["dev"] = nlohmann::json::object();
  for (size_t s = 0; s < data.dev.size(); ++s) {
    const auto outputs = glue::predict_outputs(*net, data.dev[s], dctx.comm(), settings);
    const auto metrics = glue::score_predictions(task, glue::to_predictions(task, outputs), data.dev[s]);
    nlohmann::json m = nlohmann::json::object();
    for (const auto& [name, value] : metrics) {
      m[name] = value;
      char line[256];
      std::snprintf(line, sizeof line, "%s %s: %s %.4f", task.name.c_str(), data.dev[s].name.c_str(), name.c_str(),
                    value);
      log::info(line);
    }
    report["dev"][data.dev[s].name] = m;
  }
  std::vector<std::pair<std::filesystem::path, std::string>> files;
  for (size_t s = 0; s < data.test.size(); ++s) {
    const auto predictions = glue::to_predictions(task, glue::predict_outputs(*net, data.test[s], dctx.comm(), settings));
    files.emplace_back(std::filesystem::path(cfg.output_dir) / "submission" / data.test_specs[s]->submission,
                       glue::submission_text(task, data.test[s].index, predictions));
  }
  if (rank == 0) {
    std::error_code ec;
    const auto submission_dir = std::filesystem::path(cfg.output_dir) / "submission";
    std::filesystem::create_directories(submission_dir, ec);
    TUPE_CHECK(!ec, submission_dir.string() << ": cannot create: " << ec.message());
    report["submission_files"] = nlohmann::json::array();
    for (const auto& [path, text] : files) {
      trainer::write_file_atomic(path, text);
      report["submission_files"].push_back(path.string());
      log::info("wrote " + path.string());
    }
    const auto json_path = std::filesystem::path(cfg.output_dir) / ("evaluation_" + task.name + ".json");
    trainer::write_file_atomic(json_path, report.dump(2) + "\n");
    log::info("wrote " + json_path.string());
  }
  return 0;
}

}  // namespace

int run_evaluate(int argc, char** argv) {
  dist::MpiEnv env(nullptr, nullptr);
  return run_job_on_ranks(env, "evaluate", [&] { return evaluate_job(env, argc, argv); });
}

}  // namespace tupe::cli
