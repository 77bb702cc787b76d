// tupe evaluate: a fine-tuned model saved by `tupe finetune` (models/<TASK>/) on its task's
// dev split(s) -- the GLUE metrics -- and its test split(s) -- the benchmark's submission
// files. Data-parallel under mpirun (the result does not depend on the rank count).
// Usage:
//   [mpirun -np W] tupe evaluate --model OUT/models/SST-2 --finetune.data_dir GLUE
//       [--finetune.output_dir DIR] [--skip-bad-rows]   (the tokenizer: the model's record and
//       carried vocabulary; --tokenizer.vocab for models that carry none)
// Writes evaluation_<TASK>.json and submission/<X>.tsv next to the model, into
// <models/TASK>/evaluation/step_<N>/, or into finetune.output_dir when it is given. The job is
// trainer/finetune/evaluate_job.h; this file parses its options.
#include <boost/program_options/options_description.hpp>
#include <boost/program_options/value_semantic.hpp>

#include "cli/commands.h"
#include "cli/config_cli.h"
#include "cli/rank_guard.h"
#include "dist/mpi_env.h"
#include "trainer/finetune/evaluate_job.h"

namespace po = boost::program_options;

namespace tupe::cli {

namespace {

int evaluate_job(const dist::MpiEnv& env, int argc, char** argv) {
  finetune::EvaluateJobConfig config;
  ConfigCli cli("evaluate",
                "Evaluates a model fine-tuned by `tupe finetune` (its models/<TASK> folder) on the task's dev\n"
                "split(s) and writes the submission file(s) of its test split(s), next to the model\n"
                "(<models/TASK>/evaluation/step_<N>/) unless finetune.output_dir is given. Reads data_dir, output_dir,\n"
                "max_length (0 = the length it was trained with), eval_batch_size, device, threads, skip_bad_rows\n"
                "and predict_test from [finetune], [precision]. A custom task's files: the [task] section given\n"
                "here when its name is the model's task, else the one the model recorded.");
  cli.section("finetune", finetune::FinetuneOptions::fields(), config.finetune);
  cli.section("precision", trainer::PrecisionOptions::fields(), config.precision);
  cli.section("task", finetune::TaskOptions::fields(), config.task);
  cli.section("tokenizer", data_pipeline::TokenizerOptions::fields(), config.tokenizer);
  cli.section("dist", dist::DistOptions::fields(), config.dist);
  cli.options().add_options()("model", po::value<std::string>(&config.model),
                              "fine-tuned model: <finetune output_dir>/models/<TASK> or one of its step_<N> folders")(
      "skip-bad-rows", "skip (and count) malformed task-file rows (= --finetune.skip_bad_rows true)");
  if (!cli.parse(argc, argv)) return 0;
  if (cli.vm().count("skip-bad-rows")) config.finetune.skip_bad_rows = true;
  config.effective = cli.effective();
  config.given = cli.given();
  finetune::run_evaluate_job(env, config);
  return 0;
}

}  // namespace

int run_evaluate(int argc, char** argv) {
  dist::MpiEnv env(nullptr, nullptr);
  return run_job_on_ranks(env, "evaluate", [&] { return evaluate_job(env, argc, argv); });
}

}  // namespace tupe::cli
