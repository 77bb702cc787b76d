#include "trainer/finetune/finetune_config.h"

#include <cmath>
#include <set>
#include <sstream>

#include "common/error.h"
#include "trainer/finetune/tasks/tasks.h"

namespace tupe::finetune {

std::vector<double> FinetuneOptions::learning_rate_list() const {
  std::vector<double> out;
  std::set<double> seen;
  for (const auto& item : split_comma_list(learning_rates)) {
    const double lr = parse_double("finetune.learning_rates", item);
    TUPE_CHECK(std::isfinite(lr) && lr > 0, "finetune.learning_rates: " << item << " is not a positive number");
    TUPE_CHECK(seen.insert(lr).second, "finetune.learning_rates: " << item << " listed twice");
    out.push_back(lr);
  }
  TUPE_CHECK(!out.empty(), "finetune.learning_rates: no learning rate given");
  return out;
}

std::vector<int64_t> FinetuneOptions::seed_list() const {
  std::vector<int64_t> out;
  std::set<int64_t> seen;
  for (const auto& item : split_comma_list(seeds)) {
    const int64_t s = parse_int("finetune.seeds", item);
    TUPE_CHECK(s >= 0, "finetune.seeds: " << item << " must be >= 0");
    TUPE_CHECK(seen.insert(s).second, "finetune.seeds: " << item << " listed twice");
    out.push_back(s);
  }
  TUPE_CHECK(!out.empty(), "finetune.seeds: no seed given");
  return out;
}

void FinetuneOptions::validate() const {
  fields().check(*this);
  check_task_list_syntax(tasks, "finetune.tasks");  // names are resolved by the job (custom tasks)
  learning_rate_list();
  seed_list();
}

namespace {

using C = FinetuneOptions;

/// The job's fields: what to fine-tune, from where, to where, and the grid.
void add_job_fields(FieldTable<C>& t) {
  t.text("tasks", &C::tasks, "all",
         "comma-separated GLUE tasks (CoLA, SST-2, MRPC, STS-B, QQP, MNLI, QNLI, RTE, WNLI), all, or the [task] "
         "section's name")
      .path("data_dir", &C::data_dir, "", "GLUE folder holding <TASK>/{train,dev,test}.tsv and diagnostic/")
      .path("checkpoint", &C::checkpoint, "",
            "pre-training checkpoint: a step_<N> folder, or a checkpoint.dir (its newest whole one)")
      .path("output_dir", &C::output_dir, "glue_results", "folder of results.json, results.md, submission/, models/")
      .not_empty()
      .text("learning_rates", &C::learning_rates, "2e-5,3e-5,4e-5,5e-5",
            "peak learning-rate grid, comma-separated (positive, distinct): each run's optimizer.lr")
      .text("seeds", &C::seeds, "1,2,3,4,5",
            "seeds per learning rate, comma-separated (>= 0, distinct): sentence-head init, data order, dropout")
      .integer("batch_size", &C::batch_size, 32, "examples", "global batch: per optimizer step over all ranks")
      .positive()
      .integer("micro_batch_size", &C::micro_batch_size, 0, "examples",
               "per rank per forward/backward; 0 = the rank's whole share")
      .at_least(0)
      .integer("epochs", &C::epochs, 0, "", "training epochs; 0 = the paper's (10; 5 for MNLI, QNLI, QQP)")
      .at_least(0);
}

/// The protocol's warm-up and the dropout's fields; the keys that moved to [optimizer] and
/// [precision], refused with the new key's name.
void add_optimizer_fields(FieldTable<C>& t) {
  t.real("warmup_ratio", &C::warmup_ratio, 0.06, "fraction",
         "of a run's optimizer steps: the warm-up (optimizer.warmup_steps), then optimizer.schedule's decay to 0")
      .at_least(0)
      .at_most(1)
      .real("hidden_dropout", &C::hidden_dropout, 0.1, "probability",
            "dropout on embeddings, sublayer outputs and the sentence head")
      .at_least(0)
      .below(1)
      .real("attention_dropout", &C::attention_dropout, 0.1, "probability", "dropout on attention probabilities")
      .at_least(0)
      .below(1);
  for (const char* key : {"beta1", "beta2", "eps", "weight_decay", "clip_grad_norm"})
    t.removed(key, std::string("moved to [optimizer], the section pre-training reads too: set optimizer.") + key);
  t.removed("precision",
            "moved to [precision], the section pre-training reads too: set precision.precision "
            "(fp32, bf16, fp16 or auto; fine-tuning's default auto)");
}

/// Lengths, evaluation, device and outputs.
void add_run_fields(FieldTable<C>& t) {
  t.integer("max_length", &C::max_length, 0, "tokens",
            "per example incl. [CLS]/[SEP]; 0 = model.max_positions (the paper: 512)")
      .at_least(3)
      .or_zero()
      .integer("train_rows", &C::train_rows, 0, "rows",
               "keep a random subset of this many train rows (the selection split, if any, then held out of "
               "them); 0 = all")
      .at_least(0)
      .integer("data_seed", &C::data_seed, 1, "", "seed of the train_rows subset and of the selection split")
      .at_least(0)
      .real("selection_fraction", &C::selection_fraction, 0.0, "fraction",
            "of the train rows held out as a selection split (a fixed subset drawn with data_seed) that chooses "
            "each run's epoch and the task's LR, the dev sets then scored once per run, at its chosen epoch; "
            "0 = choose on the first dev split, the paper's way")
      .at_least(0)
      .below(1)
      .integer("eval_batch_size", &C::eval_batch_size, 64, "examples", "per rank per forward in evaluation")
      .positive()
      .choice("select_epoch", &C::select_epoch, kSelectEpochWords, SelectEpoch::kBest,
              "the epoch a run reports: the best by the choosing split's primary metric (the selection split "
              "with selection_fraction > 0, else the first dev split; the earliest of equals) or the last")
      .choice("device", &C::device, dist::kDeviceRequestWords, dist::DeviceRequest::kAuto,
              "cuda:<local rank> when a GPU is visible (auto), the CPU, or a GPU")
      .integer("threads", &C::threads, 0, "", "intra-op CPU threads per rank; 0 = LibTorch's default")
      .at_least(0)
      .boolean("skip_bad_rows", &C::skip_bad_rows, false, "skip (and count) malformed rows instead of failing")
      .boolean("predict_test", &C::predict_test, true, "write the benchmark's submission files for the test sets")
      .boolean("save_model", &C::save_model, true, "save the fine-tuned weights of each task's reported run")
      .boolean("overwrite", &C::overwrite, false,
               "replace a previous fine-tuning's outputs in output_dir whole; false = refuse such a folder")
      .boolean("tensorboard", &C::tensorboard, true,
               "rank 0 writes each run's TensorBoard scalars (train loss, LR, dev metrics per epoch) under "
               "<output_dir>/tensorboard/<task>/lr<LR>_seed<seed>")
      .text("model_name", &C::model_name, "",
            "row name in the results table; \"\" = the variant (TUPE-R, BERT-A, ...)");
}

}  // namespace

const FieldTable<FinetuneOptions>& FinetuneOptions::fields() {
  static const FieldTable<C> table = [] {
    FieldTable<C> t("finetune");
    add_job_fields(t);
    add_optimizer_fields(t);
    add_run_fields(t);
    return t;
  }();
  return table;
}

}  // namespace tupe::finetune
