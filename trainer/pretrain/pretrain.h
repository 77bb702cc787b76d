// The pre-training job (`tupe pretrain`): data-parallel MLM training of TUPE-BERT.
//
// One optimizer step t (every rank, in lockstep):
//   1. dropout RNG seeded from (train.seed, t, rank): randomness is a pure function of the
//      step, so a resumed run draws exactly what the straight run drew;
//   2. this rank's B/W rows of global step t from the loader, split into micro-batches of
//      train.micro_batch_size; for each: forward under autocast, the loss
//        l_m = sum over its masked tokens of CE, with its count (those masked tokens),
//      backward of l_m * S (S = fp16 loss scale); the counts and the gradient buckets
//      all-reduce (SUM) during the last micro-step's backward only (trainer/train_step.h);
//   3. on the device: the gradients divided by the masked tokens of the GLOBAL batch (so they
//      are the gradient of the global mean, whatever W and the accumulation split:
//      docs/architecture.md "Invariants"), their global norm (inf/NaN iff some grad is),
//      unscale and clip with one multiply; the loss scaler decides whether to apply;
//      AdamW/LAMB at lr(scheduler step + 1); fp32 master weights. No host sync in a step;
//   4. every train.log_every steps the global loss (one all-reduce; reading the step's
//      results there is a host sync, which the other steps do not have), a progress line
//      and a metrics record; validation every train.eval_every; a checkpoint every
//      checkpoint.every_steps, at the end, and after SIGTERM/SIGUSR1 (agreed by all ranks).
#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>

#include "checkpoint/checkpoint_options.h"
#include "common/config_fields.h"
#include "data_pipeline/loader_config.h"
#include "data_pipeline/text/tokenizer_factory.h"
#include "dist/mpi_env.h"
#include "dist/options.h"
#include "model/config.h"
#include "trainer/options.h"
#include "trainer/pretrain/train_options.h"

namespace tupe::pretrain {

/// Everything `tupe pretrain` reads from its config.
struct PretrainConfig {
  model::ModelOptions model;
  data_pipeline::DataOptions data;
  trainer::OptimizerOptions optimizer;
  trainer::PrecisionOptions precision;
  ::tupe::checkpoint::CheckpointOptions checkpoint;
  dist::DistOptions dist;
  TrainOptions train;
  /// [tokenizer]: optional; checkpoints carry tokenizer.vocab, kind and lower-casing are the
  /// shards' (given values must agree; record_tokenizer in pretrain_job.h).
  data_pipeline::TokenizerOptions tokenizer;
  KeyValues given;  ///< "section.key" the user set -> kGivenOnCommandLine or the config file
  KeyValues effective;  ///< the whole effective config ("section.key" -> value), saved in checkpoints
};

/// Config keys a resumed run must share with its checkpoint (sizes, variant, vocabulary,
/// global batch and data order); the vocabulary hash is compared too.
std::vector<std::string> resume_must_match_keys();

struct PretrainResult {
  int64_t final_step = 0;
  bool stopped_by_signal = false;
  double last_loss = 0;                   ///< global MLM loss of the last logged step
  int64_t last_logged_step = 0;           ///< that step (0: no step was logged in this run)
  double validation_loss = -1;            ///< last validation loss (-1: none)
  double validation_accuracy = -1;        ///< its masked-token accuracy (-1: none)
  std::filesystem::path last_checkpoint;  ///< "" when none was written
};

/// Installs SIGTERM/SIGUSR1 handlers that ask the loop to checkpoint and stop at the next
/// step boundary (what SLURM sends before a pre-emption).
void install_checkpoint_signal_handlers();

/// Runs pre-training. `resume`: "none", "auto" (newest whole checkpoint under
/// checkpoint.dir, or a fresh start, saying so) or a checkpoint folder. `on_start` (may be
/// empty) runs on rank 0 once every check has passed, before step 1, with the effective
/// config as the job resolved it (config.effective with tokenizer.kind and
/// tokenizer.lower_case as the shards record them, what the checkpoints save): the CLI
/// writes it into checkpoint.dir there (a refused run writes nothing). Collective: every
/// rank calls it. Throws tupe::Error on bad config, data, checkpoints or a failed step.
PretrainResult run_pretraining(const dist::MpiEnv& env, const PretrainConfig& config, const std::string& resume,
                               const std::function<void(const KeyValues& effective)>& on_start = {});

}  // namespace tupe::pretrain
