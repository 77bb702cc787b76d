// tupe finetune: GLUE fine-tuning of a pre-trained TUPE-BERT with the paper's protocol
// (trainer/finetune/; docs/model.md "The paper's settings"), data-parallel under mpirun.
// Usage:
//   [mpirun -np W] tupe finetune --finetune.checkpoint CKPT --finetune.data_dir GLUE
//       --tokenizer.vocab vocab.txt [--finetune.tasks SST-2,RTE] [--config configs/glue/paper.ini]
//       [--skip-bad-rows] [--overwrite]
// An output_dir holding a previous fine-tuning is refused unless --overwrite (which replaces
// it whole). Writes <finetune.output_dir>/results.json, results.md, submission/<TASK>.tsv and
// models/<TASK>/step_<N>/ (the reported run's weights at the selected epoch's last step N,
// for `tupe evaluate`). The job is
// trainer/finetune/finetune_job.h; this file parses its options.
#include <boost/program_options/options_description.hpp>

#include "cli/commands.h"
#include "cli/config_cli.h"
#include "cli/rank_guard.h"
#include "common/log.h"
#include "dist/mpi_env.h"
#include "trainer/finetune/finetune_job.h"

namespace tupe::cli {

namespace {

int finetune_job(const dist::MpiEnv& env, int argc, char** argv) {
  finetune::FinetuneJobConfig config;
  ConfigCli cli("finetune",
                "Fine-tunes a pre-training checkpoint on GLUE tasks: LR grid x seeds, median over seeds per LR, best\n"
                "LR reported (the paper's protocol by default). [optimizer] and [precision] are pre-training's\n"
                "sections; each run sets optimizer.lr, warmup_steps and total_steps from finetune.learning_rates,\n"
                "warmup_ratio and epochs. Under mpirun the global batch is split over the ranks.\n"
                "A custom task (TSV, CSV or JSONL files) is described in a [task] section and run when finetune.tasks\n"
                "names it (trainer/finetune/tasks/custom_task.h; README \"Custom tasks\").");
  cli.section("finetune", finetune::FinetuneOptions::fields(), config.finetune);
  cli.section("optimizer", trainer::OptimizerOptions::fields(), config.optimizer);
  cli.section("precision", trainer::PrecisionOptions::fields(), config.precision);
  cli.section("task", finetune::TaskOptions::fields(), config.task);
  cli.section("tokenizer", data_pipeline::TokenizerOptions::fields(), config.tokenizer);
  cli.section("dist", dist::DistOptions::fields(), config.dist);
  cli.options().add_options()("skip-bad-rows", "skip (and count) malformed task-file rows (= --finetune.skip_bad_rows true)")(
      "overwrite", "replace a previous fine-tuning in finetune.output_dir whole (= --finetune.overwrite true)");
  if (!cli.parse(argc, argv)) return 0;
  if (cli.vm().count("skip-bad-rows")) config.finetune.skip_bad_rows = true;
  if (cli.vm().count("overwrite")) config.finetune.overwrite = true;
  config.effective = cli.effective();
  config.given = cli.given();
  // Once the checks passed, the whole effective config goes to the output folder and the
  // console gets one line.
  finetune::run_finetune_job(env, config,
                         [&] { log::info(cli.write_effective(config.finetune.output_dir + "/effective_config.ini")); });
  return 0;
}

}  // namespace

int run_finetune(int argc, char** argv) {
  dist::MpiEnv env(nullptr, nullptr);
  return run_job_on_ranks(env, "finetune", [&] { return finetune_job(env, argc, argv); });
}

}  // namespace tupe::cli
