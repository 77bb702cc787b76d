#include "trainer/finetune/protocol.h"

#include <algorithm>

#include "common/error.h"

namespace tupe::finetune {

double median(std::vector<double> values) {
  TUPE_CHECK(!values.empty(), "median: no values");
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2.0;
}

void summarize_runs(TaskResult& result, const std::vector<double>& lrs, size_t num_seeds) {
  TUPE_CHECK(result.task != nullptr && result.runs.size() == lrs.size() * num_seeds && num_seeds > 0,
             "summarize_runs: " << result.runs.size() << " runs for " << lrs.size() << " LRs x " << num_seeds
                                << " seeds");
  const TaskSpec& task = *result.task;
  result.by_lr.clear();
  for (size_t l = 0; l < lrs.size(); ++l) {
    LrSummary s;
    s.lr = lrs[l];
    for (size_t k = 0; k < num_seeds; ++k) s.runs.push_back(l * num_seeds + k);
    const size_t splits = result.runs[s.runs.front()].selected.size();
    for (size_t d = 0; d < splits; ++d) {
      MetricValues m;
      for (const auto& [name, unused] : result.runs[s.runs.front()].selected[d]) {
        std::vector<double> values;
        for (size_t r : s.runs) values.push_back(result.runs[r].selected.at(d).at(name));
        m[name] = median(values);
      }
      s.median.push_back(m);
    }
    s.median_score = s.median.at(0).at(task.primary_metric);
    std::vector<double> chosen_by;
    for (size_t r : s.runs) chosen_by.push_back(result.runs[r].selection_score);
    s.median_selection_score = median(chosen_by);
    result.by_lr.push_back(std::move(s));
  }
  result.best_lr = 0;
  for (size_t l = 1; l < result.by_lr.size(); ++l)
    if (result.by_lr[l].median_selection_score > result.by_lr[result.best_lr].median_selection_score) result.best_lr = l;
  const LrSummary& best = result.by_lr[result.best_lr];
  result.submission_run = best.runs.front();
  for (size_t r : best.runs)
    if (result.runs[r].selection_score > result.runs[result.submission_run].selection_score) result.submission_run = r;
}

TaskResult run_task(const RunEnvironment& env, const TaskData& data, const std::vector<double>& lrs,
                    const std::vector<int64_t>& seeds, int64_t epochs, bool keep_weights,
                    checkpoint::NamedTensors* reported_weights) {
  TaskResult result;
  result.task = data.task;
  result.epochs = epochs;
  result.train_rows = static_cast<int64_t>(data.train.size());
  result.train_rows_in_file = data.train_rows_in_file;
  result.selection_rows = static_cast<int64_t>(data.selection.size());
  result.max_length = data.max_length;
  result.skipped_rows = data.skipped_rows;
  result.skipped_messages = data.skipped_messages;
  result.truncated[data.task->train.name] = data.train.truncated;
  if (result.selection_rows > 0) result.truncated[data.selection.name] = data.selection.truncated;
  for (const auto& d : data.dev) result.truncated[d.name] = d.truncated;
  for (const auto& t : data.test) result.truncated[t.name] = t.truncated;
  result.test_specs = data.test_specs;
  for (const auto& t : data.test) result.test_index.push_back(t.index);

  // Best weights per LR so far (this rank, keep_weights only): the reported run is the best
  // run of the best LR, known only at the end.
  std::vector<checkpoint::NamedTensors> best_weights(lrs.size());
  std::vector<double> best_score(lrs.size(), -1e300);
  for (size_t l = 0; l < lrs.size(); ++l) {
    for (int64_t seed : seeds) {
      RunRecord rec = run_finetuning(env, data, lrs[l], seed, epochs, keep_weights);
      if (keep_weights && rec.selection_score > best_score[l]) {
        best_score[l] = rec.selection_score;
        best_weights[l] = std::move(rec.weights);
      }
      rec.weights.clear();
      result.runs.push_back(std::move(rec));
    }
  }
  summarize_runs(result, lrs, seeds.size());
  if (keep_weights && reported_weights) *reported_weights = std::move(best_weights[result.best_lr]);
  return result;
}

}  // namespace tupe::finetune
