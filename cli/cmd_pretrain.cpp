// tupe pretrain --config FILE [--resume auto|none|PATH]: data-parallel MLM pre-training
// under mpirun (one rank per GPU, or CPU ranks). See trainer/pretrain/pretrain.h.
#include <boost/program_options/value_semantic.hpp>
#include <sstream>

#include "cli/commands.h"
#include "cli/config_cli.h"
#include "cli/rank_guard.h"
#include "common/build_info.h"
#include "common/config_given.h"
#include "common/error.h"
#include "common/log.h"
#include "dist/mpi_env.h"
#include "trainer/pretrain/pretrain.h"

namespace tupe::cli {

namespace {

int pretrain_job(const dist::MpiEnv& env, int argc, char** argv) {
  pretrain::PretrainConfig cfg;
  ConfigCli cli("pretrain",
                "Pre-trains TUPE-BERT with masked language modelling on preprocessed shards, data-parallel\n"
                "across MPI ranks (NCCL on GPUs, MPI on CPU), with periodic atomic checkpoints.\n"
                "Example: mpirun -np 2 tupe pretrain --config configs/tiny.ini --resume auto\n"
                "Warm start: tupe pretrain --config configs/warm-start/continue-bert.ini --init-from HF_OR_CHECKPOINT");
  cli.options().add_options()("resume", boost::program_options::value<std::string>()->default_value("auto"),
                              "auto (newest whole checkpoint under checkpoint.dir, else start fresh), none, or a "
                              "checkpoint folder")(
      "init-from", boost::program_options::value<std::string>(),
      "start a new run from these weights: a tupe checkpoint (step_<N> or a run folder) or a Hugging Face BERT "
      "folder (= --train.init_from; docs/warm-start.md)");
  cli.section("model", model::ModelOptions::fields(), cfg.model);
  cli.section("data", data_pipeline::DataOptions::fields(), cfg.data);
  cli.section("optimizer", trainer::OptimizerOptions::fields(), cfg.optimizer);
  cli.section("precision", trainer::PrecisionOptions::fields(), cfg.precision);
  cli.section("checkpoint", checkpoint::CheckpointOptions::fields(), cfg.checkpoint);
  cli.section("dist", dist::DistOptions::fields(), cfg.dist);
  cli.section("train", pretrain::TrainOptions::fields(), cfg.train);
  cli.section("tokenizer", data_pipeline::TokenizerOptions::fields(), cfg.tokenizer);
  if (!cli.parse(argc, argv)) return 0;
  cfg.effective = cli.effective();
  cfg.given = cli.given();
  const std::string resume = cli.vm()["resume"].as<std::string>();
  if (cli.vm().count("init-from")) {  // the short form of --train.init_from
    const std::string path = cli.vm()["init-from"].as<std::string>();
    const auto given = cfg.given.find("train.init_from");
    TUPE_CHECK(given == cfg.given.end() || given->second != kGivenOnCommandLine || path == cfg.train.init_from,
               "--init-from " << path << " and --train.init_from " << cfg.train.init_from << " differ; give one");
    TUPE_CHECK(!path.empty(), "--init-from: empty; give a checkpoint or Hugging Face folder");
    cfg.train.init_from = path;
    cfg.effective["train.init_from"] = path;
    cfg.given["train.init_from"] = kGivenOnCommandLine;
  }

  {
    // Once the checks passed, the whole effective config (as the job resolved it: the
    // shards' tokenizer) goes to the run folder and the console gets one line.
    const auto result = pretrain::run_pretraining(env, cfg, resume, [&](const KeyValues& effective) {
      log::info(build_info_line());
      log::info(cli.write_effective(cfg.checkpoint.dir + "/effective_config.ini", effective));
    });
    std::ostringstream line;
    line << "pre-training " << (result.stopped_by_signal ? "stopped by signal" : "finished") << " at step "
         << result.final_step;
    if (result.last_logged_step > 0) line << "; loss " << result.last_loss << " at step " << result.last_logged_step;
    if (result.validation_loss >= 0)
      line << ", validation loss " << result.validation_loss << " (masked-token accuracy "
           << result.validation_accuracy << ")";
    if (!result.last_checkpoint.empty()) line << "; checkpoint " << result.last_checkpoint.string();
    log::info(line.str());
  }
  return 0;
}

}  // namespace

int run_pretrain(int argc, char** argv) {
  pretrain::install_checkpoint_signal_handlers();
  dist::MpiEnv env(&argc, &argv);
  return run_job_on_ranks(env, "pretrain", [&] { return pretrain_job(env, argc, argv); });
}

}  // namespace tupe::cli
