// tupe finetune: GLUE fine-tuning of a pre-trained TUPE-BERT with the paper's protocol
// (trainer/glue/; ../shared/TUPE.md "GLUE fine-tuning setting"), data-parallel under mpirun.
// Usage:
//   [mpirun -np W] tupe finetune --finetune.checkpoint CKPT --finetune.data_dir GLUE
//       --tokenizer.vocab vocab.txt [--finetune.tasks SST-2,RTE] [--config configs/glue/paper.ini]
//       [--skip-bad-rows]
// Writes <finetune.output_dir>/results.json, results.md, submission/<TASK>.tsv and
// models/<TASK>/step_<N>/ (the reported run's weights, for `tupe evaluate`).
#include <ATen/Parallel.h>
#include <c10/core/Device.h>

#include <boost/program_options/options_description.hpp>
#include <boost/program_options/value_semantic.hpp>
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "cli/commands.h"
#include "cli/config_cli.h"
#include "cli/rank_guard.h"
#include "common/error.h"
#include "common/ini.h"
#include "data_pipeline/text/tokenizer_factory.h"
#include "dist/agreement.h"
#include "dist/context.h"
#include "dist/device.h"
#include "dist/mpi_env.h"
#include "trainer/glue/pretrained.h"
#include "trainer/glue/protocol.h"
#include "trainer/glue/report.h"
#include "trainer/glue/task_data.h"

namespace tupe::cli {

namespace {

/// "model.<key>" entries of `config`.
KeyValues prefixed_model_keys(const model::ModelConfig& config) {
  KeyValues out;
  for (const auto& [k, v] : model::ModelConfig::fields().to_kv(config)) out["model." + k] = v;
  return out;
}

int finetune_job(const dist::MpiEnv& env, int argc, char** argv) {
  glue::FinetuneConfig cfg;
  data::TokenizerOptions tok_options;
  dist::DistOptions dist_options;
  ConfigCli cli("finetune",
                "Fine-tunes a pre-training checkpoint on GLUE tasks: LR grid x seeds, median over seeds per LR, best\n"
                "LR reported (the paper's protocol by default). Under mpirun the global batch is split over the ranks.");
  cli.section("finetune", glue::FinetuneConfig::fields(), cfg);
  cli.section("tokenizer", data::TokenizerOptions::fields(), tok_options);
  cli.section("dist", dist::DistOptions::fields(), dist_options);
  cli.options().add_options()("skip-bad-rows", "skip (and count) malformed task-file rows (= --finetune.skip_bad_rows true)");
  if (!cli.parse(argc, argv)) return 0;
  if (cli.vm().count("skip-bad-rows")) cfg.skip_bad_rows = true;
  cfg.validate();
  tok_options.validate();
  dist_options.validate();
  TUPE_CHECK(dist_options.grad_reduce == dist::GradReduce::kSum,
             "dist.grad_reduce: average would divide by the world size twice: the loss is already divided by the "
             "global batch, so gradients are summed (use sum)");
  TUPE_CHECK(!cfg.data_dir.empty(), "finetune.data_dir: no GLUE folder given");
  TUPE_CHECK(!cfg.checkpoint.empty(), "finetune.checkpoint: no pre-training checkpoint given");
  TUPE_CHECK(!tok_options.vocab.empty(), "tokenizer.vocab: the pre-training vocabulary is required");
  const auto tasks = glue::parse_task_list(cfg.tasks, "finetune.tasks");
  const auto lrs = cfg.learning_rate_list();
  const auto seeds = cfg.seed_list();
  glue::check_task_files(tasks, cfg.data_dir, cfg.predict_test);
  // Every rank runs the same config on the same task files (name, size).
  dist::require_agreement(env, "config check", dist::config_entries(cli.effective()));
  dist::require_agreement(env, "data check", glue::describe_task_files(tasks, cfg.data_dir, cfg.predict_test));

  const int rank = env.rank();
  if (cfg.threads > 0) at::set_num_threads(static_cast<int>(cfg.threads));
  auto tokenizer = data::make_tokenizer(tok_options);
  const glue::PretrainedEncoder encoder = glue::load_pretrained_encoder(cfg.checkpoint);
  glue::check_vocabulary(encoder.vocab_sha256, *tokenizer, encoder.dir.string());
  model::ModelConfig model_config = encoder.config;
  model_config.hidden_dropout = cfg.hidden_dropout;
  model_config.attention_dropout = cfg.attention_dropout;
  TUPE_CHECK(tokenizer->vocab_size() <= model_config.vocab_size,
             "tokenizer.vocab: " << tokenizer->vocab_size() << " ids, more than the model's vocab_size "
                                 << model_config.vocab_size);
  const int64_t max_length = cfg.max_length > 0 ? cfg.max_length : model_config.max_positions;
  TUPE_CHECK(max_length <= model_config.max_positions,
             "finetune.max_length: " << max_length << " exceeds the checkpoint's model.max_positions "
                                     << model_config.max_positions);

  const c10::Device device =
      dist::resolve_device(env, dist::parse_device_request(cfg.device, "finetune.device"), "finetune.device");
  const bool use_cuda = device.is_cuda();
  const bool bf16 = cfg.precision == "bf16" || (cfg.precision == "auto" && use_cuda);
  dist::DistContext dctx(env, dist_options, device);

  glue::RunEnvironment renv;
  renv.dist = &dctx;
  renv.config = &cfg;
  renv.dist_options = dist_options;
  renv.model_config = model_config;
  renv.encoder = &encoder.encoder;
  renv.encoder_where = (encoder.dir / "model.safetensors").string();
  renv.inference.device = dctx.device();
  renv.inference.autocast_dtype = bf16 ? at::kBFloat16 : at::kFloat;
  renv.inference.pad_id = tokenizer->special_tokens().pad;
  renv.inference.segments = model_config.type_vocab_size > 0;
  renv.inference.batch_rows = cfg.eval_batch_size;
  if (rank == 0) renv.log = [](const std::string& line) { std::cout << line << std::endl; };

  glue::ReportHeader header;
  header.model_name = cfg.model_name.empty() ? glue::variant_name(model_config) : cfg.model_name;
  header.pretrain_steps = encoder.step;
  header.checkpoint = encoder.dir.string();
  header.world_size = env.world_size();
  header.device = dctx.device().str();
  header.precision = bf16 ? "bf16" : "fp32";
  header.config = cli.effective();
  if (rank == 0) {
    std::cout << "# effective config\n";
    cli.print_effective(std::cout);
    std::cout << "# fine-tuning " << header.model_name << " from " << encoder.dir.string() << " (step " << encoder.step
              << ") on " << env.world_size() << " rank(s), " << header.device << ", " << header.precision << "; "
              << lrs.size() << " LR(s) x " << seeds.size() << " seed(s); max length " << max_length << std::endl;
  }

  std::vector<glue::TaskResult> results;
  for (const glue::TaskSpec* task : tasks) {
    const glue::TaskData data =
        glue::load_task_data(*task, cfg, *tokenizer, max_length, cfg.predict_test, std::max(1, at::get_num_threads()));
    const int64_t epochs = cfg.epochs > 0 ? cfg.epochs : task->paper_epochs;
    if (rank == 0) {
      int64_t skipped = 0;
      for (const auto& [split, n] : data.skipped_rows) skipped += n;
      std::cout << "# " << task->name << ": " << data.train.size() << " of " << data.train_rows_in_file
                << " train rows, " << epochs << " epoch(s), " << data.dev.size() << " dev split(s), "
                << data.test.size() << " test split(s)" << (skipped ? ", " + std::to_string(skipped) + " bad rows skipped" : "")
                << std::endl;
    }
    trainer::NamedTensors reported;
    const bool keep = rank == 0 && cfg.save_model;
    glue::TaskResult result = glue::run_task(renv, data, lrs, seeds, epochs, keep, &reported);
    if (keep) {
      const glue::RunRecord& run = result.runs.at(result.submission_run);
      KeyValues saved = header.config;
      for (const auto& [k, v] : prefixed_model_keys(model_config)) saved[k] = v;
      saved["glue.task"] = task->name;
      saved["glue.max_length"] = std::to_string(max_length);
      saved["glue.num_outputs"] = std::to_string(task->num_outputs());
      saved["glue.lr"] = format_double(run.lr);
      saved["glue.seed"] = std::to_string(run.seed);
      saved["glue.selected_epoch"] = std::to_string(run.selected_epoch);
      saved["glue.pretrain_checkpoint"] = encoder.dir.string();
      result.model_dir = glue::save_finetuned_model(std::filesystem::path(cfg.output_dir) / "models" / task->name,
                                                    run.total_steps, reported, saved, encoder.vocab_sha256);
    }
    results.push_back(std::move(result));
    if (rank == 0) glue::write_outputs(cfg.output_dir, header, results);  // after every task: partial results survive
  }
  if (rank == 0) {
    std::cout << "\n" << glue::results_markdown(header, results) << "\nwrote " << cfg.output_dir << "/results.json, "
              << cfg.output_dir << "/results.md" << (cfg.predict_test ? ", " + cfg.output_dir + "/submission/" : "")
              << std::endl;
  }
  return 0;
}

}  // namespace

int run_finetune(int argc, char** argv) {
  dist::MpiEnv env(nullptr, nullptr);
  return run_job_on_ranks(env, "finetune", [&] { return finetune_job(env, argc, argv); });
}

}  // namespace tupe::cli
