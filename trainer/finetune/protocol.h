// The paper's protocol over one task (docs/model.md "The paper's settings"): every peak LR of
// the grid with every seed; per LR the MEDIAN over seeds of each dev metric (at each run's
// selected epoch); the LR with the best median primary metric is reported. The submission
// predictions (and the saved model) come from the best run (highest primary metric) of the
// reported LR. With a selection split (finetune.selection_fraction > 0) the choices -- the
// LR, and the submission run -- are made on the selection split's primary metric instead
// (RunRecord::selection_score), and the dev medians of the chosen LR are reported.
#pragma once
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "trainer/finetune/run.h"

namespace tupe::finetune {

/// Median of the seeds' runs at one LR.
struct LrSummary {
  double lr = 0;
  std::vector<size_t> runs;           ///< indices into TaskResult::runs
  double median_score = 0;            ///< median primary metric (first dev split)
  double median_selection_score = 0;  ///< median of the runs' selection_score (= median_score without a selection split)
  std::vector<MetricValues> median;   ///< per dev split, each metric's median over the seeds
};

struct TaskResult {
  const TaskSpec* task = nullptr;
  int64_t epochs = 0;                 ///< epochs of every run
  int64_t train_rows = 0;             ///< rows trained on
  int64_t train_rows_in_file = 0;     ///< usable rows of train.tsv
  int64_t selection_rows = 0;         ///< rows held out of train to choose epochs and LRs (0: the dev set chose)
  int64_t max_length = 0;
  std::map<std::string, int64_t> skipped_rows;  ///< per split read
  std::vector<std::string> skipped_messages;
  std::map<std::string, int64_t> truncated;     ///< per split: examples cut to max_length
  std::vector<RunRecord> runs;        ///< LR-major, seeds in the given order
  std::vector<LrSummary> by_lr;       ///< in grid order
  size_t best_lr = 0;                 ///< index into by_lr
  size_t submission_run = 0;          ///< index into runs: the best run at the best LR
  std::vector<const SplitSpec*> test_specs;      ///< test files predicted (aligned with runs[i].test)
  std::vector<std::vector<std::string>> test_index;  ///< per test split: the index column
  std::filesystem::path model_dir;    ///< where the submission run's model was saved ("" = not saved)
};

/// Median of `values` (the mean of the two middle values for an even count). Throws on empty.
double median(std::vector<double> values);

/// Fills by_lr, best_lr and submission_run from `runs` (LR-major order as given by `lrs`
/// x `num_seeds`). Pure. Ties: the earlier LR / the earlier seed wins.
void summarize_runs(TaskResult& result, const std::vector<double>& lrs, size_t num_seeds);

/// Runs the grid for one task and summarises it. `keep_weights`: this rank keeps the best
/// weights per LR (to save the reported model). Collective.
TaskResult run_task(const RunEnvironment& env, const TaskData& data, const std::vector<double>& lrs,
                    const std::vector<int64_t>& seeds, int64_t epochs, bool keep_weights,
                    checkpoint::NamedTensors* reported_weights);

}  // namespace tupe::finetune
