// The fine-tuning job (`tupe finetune`, cli/cmd_finetune.cpp parses its options): checks,
// the pre-trained encoder and tokenizer, the device and communicator, then each task with the
// paper's protocol (protocol.h), the reported run's weights saved and the results files
// rewritten after every task (partial results survive a later failure).
#pragma once
#include <functional>
#include <ostream>
#include <vector>

#include "common/config_fields.h"
#include "data_pipeline/text/tokenizer_factory.h"
#include "dist/mpi_env.h"
#include "dist/options.h"
#include "trainer/finetune/finetune_config.h"
#include "trainer/finetune/report.h"
#include "trainer/finetune/tasks/custom_task.h"
#include "trainer/options.h"

namespace tupe::finetune {

/// What `tupe finetune` reads from its config.
struct FinetuneJobConfig {
  FinetuneOptions finetune;  ///< [finetune]
  /// [optimizer], pre-training's section: everything but lr, warmup_steps and total_steps,
  /// which each run sets from finetune.learning_rates, warmup_ratio and epochs.
  trainer::OptimizerOptions optimizer;
  trainer::PrecisionOptions precision = trainer::default_finetune_precision();  ///< [precision] (default auto)
  TaskOptions task;          ///< [task]: a custom task (custom_task.h), run when finetune.tasks names it
  data_pipeline::TokenizerOptions tokenizer;  ///< [tokenizer]: the pre-training vocabulary (model_tokenizer.h)
  dist::DistOptions dist;           ///< [dist]
  KeyValues effective;              ///< the whole effective config (reports, saved models)
  KeyValues given;                  ///< "section.key" the user set -> kGivenOnCommandLine or the config file (model_tokenizer.h)
};

/// Runs fine-tuning on every task of config.finetune.tasks (GLUE tasks, and the [task]
/// section's custom task when listed by name). Collective: every rank calls it;
/// rank 0 logs progress (common/log.h, info) and writes <output_dir>/results.json, results.md,
/// submission/ and models/. `on_start` (may be empty) runs on rank 0 once every check has
/// passed, before the first task (the CLI writes the effective config there). Throws
/// tupe::Error (one line) on bad options, task files, a checkpoint or vocabulary that does
/// not fit, or a failed step.
std::vector<TaskResult> run_finetune_job(const dist::MpiEnv& env, const FinetuneJobConfig& config,
                                         const std::function<void()>& on_start = {});

}  // namespace tupe::finetune
