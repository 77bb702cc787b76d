// What the model card of an export (tools/export/model_card.h) says, gathered from what the
// checkpoint and the files beside it record -- never typed by hand:
//   the model      the checkpoint's model.* keys and tensors (parameter count = the sum of
//                  the element counts of its model.safetensors tensors)
//   pre-training   trainer_state.json of the pre-training checkpoint (a fine-tuned model's
//                  glue.pretrain_checkpoint): step, data.global_batch_size, data_position,
//                  optimizer.*, precision.*; its metrics file (train.metrics_dir, else
//                  <checkpoint folder>/../metrics, else checkpoint.dir/metrics: rank_0.jsonl)
//                  for the last validation and training loss at or before the step; the
//                  headers of its training shards (data.train_shards) for the corpus
//   GLUE           <output_dir>/results.json of `tupe finetune` (three levels above the
//                  models/<TASK>/step_N folder, else finetune.output_dir): the task's
//                  reported dev metrics, when its model_dir is this model's folder
// A file that is missing or unreadable leaves its facts unknown (the card says so; a
// damaged one is also a warning); it never stops the export.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "checkpoint/model_checkpoint.h"

namespace tupe::exporting {

/// The training corpus as the training shards' headers record it (data_pipeline/shard_format.h).
struct CorpusFacts {
  std::string train_shards;       ///< data.train_shards as saved ("" = not recorded)
  std::string validation_shards;  ///< data.validation_shards as saved
  std::string unread;             ///< why the shards were not read ("" = read)
  int64_t files = 0;              ///< training shard files
  int64_t sequences = 0;          ///< sum of num_sequences
  int64_t tokens = 0;             ///< sum of num_tokens ([CLS], [SEP] included)
  int64_t max_seq_len = 0;
  std::string packing, documents, tokenizer_kind, command_line, run_id;
  bool lower_case = true;
  bool command_lines_differ = false;  ///< the files record more than one command line
};

/// How the model was pre-trained (a pre-training checkpoint's trainer_state.json and metrics).
struct PretrainFacts {
  std::string state_file;       ///< trainer_state.json read ("" = none could be read)
  std::string unread;           ///< why not ("" = read)
  int64_t step = 0;             ///< optimizer steps
  int64_t world_size = 1;
  int64_t global_batch = 0;     ///< data.global_batch_size (sequences per step; 0 = not recorded)
  int64_t epoch = 0, consumed_samples = 0;  ///< data_position
  std::string optimizer, lr, warmup_steps, total_steps, schedule, precision;  ///< saved config text
  std::string metrics_file;     ///< rank_0.jsonl read ("" = none found)
  std::optional<double> validation_loss;  ///< the last record's "validation_loss" at step <= `step`
  int64_t validation_step = 0;  ///< that record's step
  std::optional<checkpoint::WeightsOrigin> origin;  ///< a warm-started run's source (trainer_state "origin")
  std::optional<double> train_loss;       ///< the last record's "loss" at step <= `step`
  int64_t train_loss_step = 0;
  CorpusFacts corpus;

  /// step x global_batch (0 when the batch is not recorded).
  int64_t sequences_seen() const { return step * global_batch; }
};

/// A fine-tuned model's task and its GLUE results (results.json).
struct FinetuneFacts {
  std::string task;                 ///< glue.task
  std::vector<std::string> labels;  ///< glue.labels
  std::string lr, seed, selected_epoch, max_length, pretrain_checkpoint;  ///< glue.* text
  std::string results_file;         ///< results.json read ("" = none found or not this model's)
  std::string primary_metric;       ///< e.g. "accuracy"
  int64_t epochs = 0, train_rows = 0;
  double best_lr = 0;
  /// The reported (best LR's median) dev metrics: {split, {{metric, value}, ...}} in file order.
  std::vector<std::pair<std::string, std::vector<std::pair<std::string, double>>>> reported;
};

/// Everything the card says.
struct CardFacts {
  checkpoint::ModelCheckpoint const* ckpt = nullptr;  ///< the model (config, tensors, state)
  std::string variant;        ///< "TUPE-R", "BERT-A^d", "TUPE-A (tie-cls)", ...
  int64_t parameters = 0;     ///< elements of the checkpoint's model tensors
  std::string tokenizer_kind; ///< "wordpiece" | "sentencepiece" | "" (unknown)
  std::optional<bool> lower_case;
  std::string vocab_file;     ///< the vocabulary exported ("" = none)
  PretrainFacts pretrain;
  std::optional<FinetuneFacts> finetune;  ///< set for a model of `tupe finetune`
};

/// Gathers the facts of `ckpt` (kept by pointer: it must outlive the result). `vocab`: the
/// vocabulary exported ("" = none), `lower_case` the lower-casing used (nullopt = unknown).
CardFacts gather_card_facts(const checkpoint::ModelCheckpoint& ckpt, const std::string& vocab,
                            std::optional<bool> lower_case);

}  // namespace tupe::exporting
