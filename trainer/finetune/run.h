// One fine-tuning run: a task, a peak learning rate and a seed (docs/model.md "The
// paper's settings"), data-parallel over the ranks of a DistContext.
//
// Per run: the sentence head is initialised from the seed (rank 0's copy broadcast), the
// encoder is the pre-training checkpoint's (strict copy); the [optimizer] section's optimizer
// (AdamW or LAMB; no weight decay on biases/LayerNorm) on every parameter but mlm_head.*,
// at this run's peak LR, rising linearly over warmup_ratio of the run's steps and decaying
// to 0 at its last step by optimizer.schedule; the [precision] section's precision.
// One optimizer step t over the global batch b_t of batch_size examples (the epoch's order is
// a pure function of (seed, epoch)) is trainer/train_step.h's, the step pre-training runs,
// with the loss of a micro-batch
//     l = sum over its examples of CE(logits, label)  (or (y - score)^2 for STS-B)
// and its count, the micro-batch's examples: rank r takes examples r, r + W, ... of b_t, in
// micro-batches, and the step divides by the examples of b_t over all ranks (a rank without
// examples in b_t joins the step with none). So the update equals one rank's on the whole
// batch whatever W (docs/architecture.md "Data parallel is exact"). Dropout is seeded per
// step t and rank r from a seed derived from the run's seed (trainer::step_seed).
// After every epoch: the metrics of the split that chooses (the selection split held out of
// train when finetune.selection_fraction > 0, else the first dev split); the run reports the
// best (or last) epoch by the task's primary metric there. With a selection split the dev
// sets are scored once, after the last epoch, with the chosen epoch's weights.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "checkpoint/named_tensors.h"
#include "dist/context.h"
#include "model/config.h"
#include "trainer/finetune/evaluation.h"
#include "trainer/finetune/finetune_config.h"
#include "trainer/finetune/metrics.h"
#include "trainer/finetune/task_data.h"
#include "trainer/options.h"

namespace tupe::finetune {

/// What every run of a job shares.
struct RunEnvironment {
  dist::DistContext* dist = nullptr;               ///< ranks, device, communicator
  const FinetuneOptions* config = nullptr;         ///< the [finetune] options
  trainer::OptimizerOptions optimizer;             ///< [optimizer]; each run sets lr, warmup_steps, total_steps
  trainer::PrecisionOptions precision;             ///< [precision] with precision resolved (never auto)
  dist::DistOptions dist_options;                  ///< bucket size, wire dtype, timeout
  model::ModelOptions model_config;                ///< the checkpoint's, with the fine-tuning dropout
  const checkpoint::NamedTensors* encoder = nullptr;  ///< the pre-training checkpoint's tensors (CPU)
  std::string encoder_where;                       ///< names the checkpoint in errors
  /// A Hugging Face BERT's pooler as sentence_head.dense.{weight,bias} (CPU): the sentence
  /// head's dense layer starts from it, as transformers' BertForSequenceClassification does;
  /// null or empty for a tupe checkpoint (the whole head starts fresh).
  const checkpoint::NamedTensors* pooler = nullptr;
  InferenceSettings inference;                     ///< device, autocast dtype, [PAD], segments, eval batch
};

/// Metrics after one epoch.
struct EpochRecord {
  int64_t epoch = 0;               ///< 1-based
  int64_t step = 0;                ///< optimizer steps done at its end
  double train_loss = 0;           ///< mean loss per training example over the epoch (all ranks)
  double learning_rate = 0;        ///< LR of the epoch's last step
  std::vector<MetricValues> dev;   ///< per dev split (TaskData::dev order); empty with a selection split
  MetricValues selection;          ///< on the selection split (empty without one)
  double score = 0;                ///< primary metric on the split that chooses (selection, else first dev)
};

struct RunRecord {
  double lr = 0;                   ///< peak learning rate
  int64_t seed = 0;
  int64_t epochs = 0;
  int64_t steps_per_epoch = 0, total_steps = 0, warmup_steps = 0;
  int64_t skipped_steps = 0;       ///< steps skipped for non-finite gradients
  std::string optimizer;           ///< the step's optimizer, as it was built ("adamw" | "lamb")
  std::vector<EpochRecord> history;
  int64_t selected_epoch = 0;      ///< 1-based epoch the run reports (select_epoch best | last)
  double score = 0;                ///< primary dev metric (first dev split) at selected_epoch
  /// Primary metric at selected_epoch on the split that chose it: the selection split, or
  /// the first dev split (then equal to score). The protocol chooses LRs by it.
  double selection_score = 0;
  int64_t dev_evaluations = 0;     ///< times the dev sets were scored (epochs, or 1 with a selection split)
  std::vector<MetricValues> selected;   ///< dev metrics at selected_epoch
  std::vector<Predictions> test;        ///< per TaskData::test split, from the selected epoch's weights
  checkpoint::NamedTensors weights;        ///< selected epoch's parameters (CPU), when asked to keep them
  double seconds = 0;                   ///< wall time of the run
};

/// Runs one (lr, seed) fine-tuning for `epochs` epochs. Collective: every rank calls it with
/// the same arguments. Throws tupe::Error on bad data, a strict-loading mismatch, or too many
/// consecutive non-finite steps.
RunRecord run_finetuning(const RunEnvironment& env, const TaskData& data, double lr, int64_t seed, int64_t epochs,
                         bool keep_weights);

/// Optimizer steps per epoch: ceil(rows / batch_size).
int64_t steps_per_epoch(int64_t rows, int64_t batch_size);

}  // namespace tupe::finetune
