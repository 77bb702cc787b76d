// The pre-training job's state and its phases (internal to trainer/pretrain; the entry point is
// run_pretraining in pretrain.h). run_pretraining reads top to bottom:
//   check_config -> setup_device                               (pretrain.cpp)
//   -> init_from_source (train.init_from only)                 (init_from.cpp)
//   -> open_data -> build_model                                (pretrain.cpp)
//   -> resume_job                                              (resume.cpp)
//   -> start_loader -> announce                                (pretrain.cpp)
//   -> train_loop: per step run_step, log_step, validate_if_due, save_checkpoint
//                                                              (pretrain_loop.cpp)
// Each phase fills or uses fields of one PretrainJob; nothing is global except the signal
// flag (pretrain_loop.cpp), which a signal handler can reach and nothing else can.
#pragma once
#include <c10/core/Device.h>

#include <memory>
#include <optional>
#include <string>

#include "checkpoint/checkpoint_store.h"
#include "common/folder_lock.h"
#include "checkpoint/model_checkpoint.h"
#include "checkpoint/trainer_state.h"
#include "checkpoint/warm_start.h"
#include "data_pipeline/dataset.h"
#include "data_pipeline/loader.h"
#include "dist/context.h"
#include "model/tupe_bert.h"
#include "trainer/pretrain/batch_plan.h"
#include "trainer/pretrain/metrics.h"
#include "trainer/pretrain/pretrain.h"
#include "trainer/pretrain/step.h"
#include "trainer/train_step.h"

namespace tupe::pretrain {

/// Everything one rank's pre-training run holds. Fields are declared in construction order
/// (destroyed in reverse: the loader's threads and the step runner go before what they use).
struct PretrainJob {
  PretrainJob(const dist::MpiEnv& e, const PretrainConfig& c) : env(e), cfg(c), rank(e.rank()), world(e.world_size()) {}
  const dist::MpiEnv& env;
  PretrainConfig cfg;  ///< the run's config, a copy: open_data resolves model.vocab_size = 0 (and its effective key)
  const int rank, world;
  int64_t max_steps = 0;  ///< train.max_steps, else optimizer.total_steps
  std::unique_ptr<FolderLock> folder_lock;  ///< checkpoint.dir's lock, held by rank 0 for the job's life

  // setup_device
  std::unique_ptr<dist::DistContext> context;  ///< communicator and watchdog of this rank
  bool use_cuda = false;
  trainer::Precision precision = trainer::Precision::kFp32;  ///< precision.precision resolved (auto -> bf16 | fp32)
  std::unique_ptr<Progress> progress;  ///< rank 0 prints
  // init_from_source (train.init_from)
  std::optional<checkpoint::ModelCheckpoint> source;   ///< the weights to start from; freed once copied
  std::optional<checkpoint::WarmStartPlan> warm;       ///< how the model follows them
  std::optional<checkpoint::WeightsOrigin> origin;     ///< what every checkpoint records of them
  // open_data
  std::shared_ptr<const data_pipeline::PretrainDataset> train_data, validation_data;  ///< validation may be null
  data_pipeline::DataOptions loader_config;   ///< cfg.data with pin_memory resolved
  BatchPlan plan;                             ///< micro-batch and accumulation
  std::optional<checkpoint::TokenizerRecord> tokenizer_record;  ///< what checkpoints record (record_tokenizer)
  std::string vocab_bytes;                    ///< the vocabulary file checkpoints carry ("" = none)
  /// data.mask_strategy = whole_word | span: which ids continue a word (load_word_boundaries); else null
  std::shared_ptr<const data_pipeline::WordBoundaries> word_boundaries;
  // build_model
  model::TupeBert net{nullptr};
  std::unique_ptr<trainer::TrainStep> step;  ///< optimizer, scaler, LR schedule, DDP, step counters
  std::unique_ptr<checkpoint::CheckpointStore> store;
  std::string vocab_sha256;  ///< the shards' vocabulary, recorded in checkpoints
  // resume_job
  checkpoint::DataPosition start_position;  ///< where the loader starts (the resumed checkpoint's)
  std::string resumed_state_file;        ///< trainer_state.json resumed from ("" = fresh start)
  // start_loader, announce
  std::unique_ptr<data_pipeline::Loader> loader;
  std::unique_ptr<MetricsLog> metrics;
  double peak_tflops = 0;  ///< MFU denominator per rank (TFLOP/s); <= 0: no MFU
  std::string peak_source;  ///< where peak_tflops came from (announce; in every metrics record)
  /// "training" / "evaluation" -> the attention kernel a micro-batch (an evaluation batch) of
  /// the shards' longest sequence gets (model/attention.h attention_kernel; start_loader):
  /// logged once, in the metrics' start record and in every checkpoint's trainer_state.json.
  std::vector<std::pair<std::string, std::string>> attention_kernels;
  PretrainResult result;

  dist::Communicator& comm() { return context->comm(); }
  const c10::Device& device() const { return context->device(); }
};

// pretrain.cpp
/// Validates every section and the combinations pre-training refuses. Throws tupe::Error.
void check_config(const PretrainConfig& cfg);
/// Resolves the device, creates the communicator (collective) and the progress printer.
void setup_device(PretrainJob& job);
// init_from.cpp
/// train.init_from: reads the source (rank 0 verifies it and hashes its weights; the others
/// read the folder it took), checks train.init_from_sha256, and makes the source's shape the
/// run's model (cfg.model and its effective keys; checkpoint/warm_start.h). Collective. Throws
/// tupe::Error / AgreedError naming train.init_from, a model key or the source's file.
void init_from_source(PretrainJob& job);
/// The shards of a warm-started run were made with the source's vocabulary (SHA-256). Throws
/// tupe::Error "data.train_shards: ... preprocess with its vocabulary".
void check_source_data(const PretrainJob& job);

/// Opens the train and validation shards; the ranks agree on them; checks them against the
/// model config (model.vocab_size = 0 becomes the shards' size, in cfg.model and
/// cfg.effective); plans micro-batches.
void open_data(PretrainJob& job);
/// Builds the model with rank 0's initial weights on every rank, the training step and the
/// checkpoint store (rank 0 checks checkpoint.dir is writable).
void build_model(PretrainJob& job);
/// The effective config as the job resolved it: cfg.effective with tokenizer.kind and
/// tokenizer.lower_case as the tokenizer record says (left out when the job has none: no
/// default may pass for a record). What checkpoints save and effective_config.ini shows.
KeyValues resolved_effective(const PretrainJob& job);
/// What a checkpoint of the job records now: the step's counters and loss scaler, the data
/// position after the last batch taken (the start position before the loader runs), the
/// resolved effective config, the vocabulary hash and the world size. Reads the scaler (a
/// host sync).
checkpoint::TrainerState checkpoint_record(PretrainJob& job);
/// Starts the loader at the (resumed) data position and opens the metrics log.
void start_loader(PretrainJob& job);
/// Picks the MFU peak and prints the one-line run summary.
void announce(PretrainJob& job);

// tokenizer_record.cpp
/// The tokenizer record of the job's checkpoints: kind and lower-casing as the shards
/// record them (tokenizer.kind / tokenizer.lower_case, when set, must agree), and the
/// tokenizer.vocab file's bytes when given (its SHA-256 must be the shards'). Throws ONE-line
/// tupe::Error "tokenizer.<key>: ..." on a contradiction.
void record_tokenizer(PretrainJob& job);
/// data.mask_strategy = whole_word | span: the word boundaries of the shards' vocabulary, read
/// from tokenizer.vocab (or the vocabulary train.init_from carries) into job.word_boundaries.
/// Throws ONE-line tupe::Error "data.mask_strategy = ...: ..." when no vocabulary of the shards'
/// SHA-256 is at hand. Nothing for token.
void load_word_boundaries(PretrainJob& job);

// resume.cpp
/// Applies `--resume` (auto | none | a checkpoint folder): finds the checkpoint, checks every
/// rank took the same one and that it fits this config, and restores weights, optimizer,
/// loss scaler, steps and data position into the job.
void resume_job(PretrainJob& job, const std::string& resume);

// pretrain_loop.cpp
/// Runs steps until max_steps or a checkpoint signal; logs, validates and checkpoints.
void train_loop(PretrainJob& job);

}  // namespace tupe::pretrain
