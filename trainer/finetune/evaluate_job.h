// The evaluation job (`tupe evaluate`): a model saved by `tupe finetune` (models/<TASK>/) on
// its task's dev split(s) -- the task's metrics -- and test split(s) -- the benchmark's
// submission files. Data-parallel (the result does not depend on the rank count).
// run_evaluate_job reads top to bottom: check_config -> load_model -> choose_output_dir ->
// setup_inference -> evaluate_dev -> predict_test -> write_outputs. Its outputs go next to the
// model (<models/TASK>/evaluation/step_<N>/) unless finetune.output_dir is given.
#pragma once
#include <string>

#include "common/config_fields.h"
#include "data_pipeline/text/tokenizer_factory.h"
#include "dist/mpi_env.h"
#include "dist/options.h"
#include "trainer/finetune/finetune_config.h"
#include "trainer/finetune/tasks/custom_task.h"
#include "trainer/options.h"

namespace tupe::finetune {

/// What `tupe evaluate` reads: [finetune] (data_dir, output_dir when given, max_length: 0 = the
/// length the model was trained with, eval_batch_size, device, threads, skip_bad_rows,
/// predict_test), precision.precision (the autocast dtype; default auto), [task],
/// [tokenizer], [dist] and the model folder.
struct EvaluateJobConfig {
  FinetuneOptions finetune;
  trainer::PrecisionOptions precision = trainer::default_finetune_precision();  ///< [precision]: precision only
  TaskOptions task;  ///< a custom task's files, when its name is the model's task
  data_pipeline::TokenizerOptions tokenizer;
  dist::DistOptions dist;
  std::string model;    ///< <finetune output_dir>/models/<TASK> or one of its step_<N> folders
  KeyValues given;  ///< "section.key" the user set -> kGivenOnCommandLine or the config file (model_tokenizer.h)
  KeyValues effective;  ///< the whole effective config (the ranks compare it)
};

/// Runs the evaluation; rank 0 writes <output_dir>/evaluation_<TASK>.json and
/// submission/<X>.tsv. Collective. Throws tupe::Error (one line) on bad options, a model
/// that is not a fine-tuned one, another vocabulary, or bad task files.
void run_evaluate_job(const dist::MpiEnv& env, const EvaluateJobConfig& config);

}  // namespace tupe::finetune
