#include "trainer/finetune/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>

#include "checkpoint/durable_io.h"
#include "common/error.h"

namespace tupe::finetune {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

json metrics_json(const MetricValues& m) {
  json j = json::object();
  for (const auto& [k, v] : m) j[k] = v;
  return j;
}

json dev_json(const TaskSpec& task, const std::vector<MetricValues>& dev) {
  json j = json::object();
  for (size_t s = 0; s < dev.size(); ++s) j[task.dev.at(s).name] = metrics_json(dev[s]);
  return j;
}

std::string percent(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", 100.0 * v);
  return buf;
}

std::string steps_text(int64_t steps) {
  if (steps >= 1000000 && steps % 1000000 == 0) return std::to_string(steps / 1000000) + "M";
  if (steps >= 1000 && steps % 1000 == 0) return std::to_string(steps / 1000) + "k";
  return std::to_string(steps);
}

/// The reported value of a table column ("MNLI-m", "SST", ...): the median, at the best LR,
/// of the primary metric of the dev split with that column.
bool column_value(const std::vector<TaskResult>& results, const std::string& column, double* value) {
  for (const auto& r : results)
    for (size_t s = 0; s < r.task->dev.size(); ++s)
      if (r.task->dev[s].table_column == column) {
        *value = r.by_lr.at(r.best_lr).median.at(s).at(r.task->primary_metric);
        return true;
      }
  return false;
}

}  // namespace

namespace {

/// One run of a task: its settings, steps, every epoch's dev metrics and the selected one.
json run_json(const TaskSpec& task, const RunRecord& run) {
  json j;
  j["lr"] = run.lr;
  j["seed"] = run.seed;
  j["steps_per_epoch"] = run.steps_per_epoch;
  j["total_steps"] = run.total_steps;
  j["warmup_steps"] = run.warmup_steps;
  j["skipped_steps"] = run.skipped_steps;
  j["optimizer"] = run.optimizer;
  j["seconds"] = run.seconds;
  j["selected_epoch"] = run.selected_epoch;
  j["score"] = run.score;
  j["selection_score"] = run.selection_score;
  j["dev_evaluations"] = run.dev_evaluations;
  j["dev"] = dev_json(task, run.selected);
  j["epochs"] = json::array();
  for (const auto& e : run.history) {
    json epoch = {{"epoch", e.epoch},
                  {"step", e.step},
                  {"train_loss", e.train_loss},
                  {"learning_rate", e.learning_rate},
                  {"dev", dev_json(task, e.dev)}};
    if (!e.selection.empty()) epoch["selection"] = metrics_json(e.selection);
    j["epochs"].push_back(std::move(epoch));
  }
  return j;
}

/// One task: what was read, every run, the medians per LR and what was reported.
json task_json(const TaskResult& r) {
  const TaskSpec& task = *r.task;
  json t;
  t["task"] = task.name;
  t["kind"] = to_string(task.kind);
  t["labels"] = task.labels;
  t["primary_metric"] = task.primary_metric;
  t["epochs"] = r.epochs;
  t["max_length"] = r.max_length;
  t["train_rows"] = r.train_rows;
  t["train_rows_in_file"] = r.train_rows_in_file;
  t["selection_rows"] = r.selection_rows;
  t["chosen_on"] = r.selection_rows > 0 ? "selection" : "dev";
  t["skipped_rows"] = r.skipped_rows;
  t["skipped_examples"] = r.skipped_messages;
  t["truncated_examples"] = r.truncated;
  t["runs"] = json::array();
  for (const auto& run : r.runs) {
    t["runs"].push_back(run_json(task, run));
  }
  t["by_lr"] = json::array();
  for (const auto& s : r.by_lr) {
    json seeds = json::array();
    for (size_t i : s.runs) seeds.push_back(r.runs[i].seed);
    t["by_lr"].push_back(
        {{"lr", s.lr}, {"seeds", seeds}, {"median_score", s.median_score},
         {"median_selection_score", s.median_selection_score}, {"median", dev_json(task, s.median)}});
  }
  const LrSummary& best = r.by_lr.at(r.best_lr);
  t["best_lr"] = best.lr;
  t["reported"] = dev_json(task, best.median);
  t["submission_run"] = {{"lr", r.runs.at(r.submission_run).lr}, {"seed", r.runs.at(r.submission_run).seed}};
  json subs = json::array();
  for (const auto* spec : r.test_specs)
    subs.push_back({{"split", spec->name}, {"file", "submission/" + spec->submission}});
  t["submission_files"] = subs;
  t["model_dir"] = r.model_dir.string();
  return t;
}

}  // namespace

json results_json(const ReportHeader& header, const std::vector<TaskResult>& results) {
  json doc;
  doc["format"] = "tupe-glue-results";
  doc["format_version"] = 1;
  doc["model"] = header.model_name;
  doc["pretrain_steps"] = header.pretrain_steps;
  doc["checkpoint"] = header.checkpoint;
  doc["world_size"] = header.world_size;
  doc["device"] = header.device;
  doc["precision"] = header.precision;
  doc["config"] = header.config;
  doc["tasks"] = json::array();
  for (const auto& r : results) doc["tasks"].push_back(task_json(r));
  return doc;
}

namespace {

/// Table 1's row: the GLUE columns and their average.
void glue_table(std::ostringstream& md, const ReportHeader& header, const std::vector<TaskResult>& results) {
  md << "# GLUE dev results\n\n"
     << "Median over seeds at the best learning rate, in percent (CoLA: Matthews corr., STS-B: Pearson, "
     << "others: accuracy); layout of Table 1 of Ke, He, Liu (ICLR 2021). avg = mean of the 9 numbers.\n\n";
  static const char* kColumns[] = {"QNLI", "QQP", "SST", "CoLA", "MRPC", "RTE", "STS"};
  md << "| model | steps | MNLI-m/mm | QNLI | QQP | SST | CoLA | MRPC | RTE | STS | avg |\n"
     << "|---|---|---|---|---|---|---|---|---|---|---|\n";
  double sum = 0;
  int count = 0;
  auto cell = [&](const std::string& column) {
    double v = 0;
    if (!column_value(results, column, &v)) return std::string("-");
    sum += 100.0 * v;
    ++count;
    return percent(v);
  };
  md << "| " << header.model_name << " | " << steps_text(header.pretrain_steps) << " | ";
  const std::string m = cell("MNLI-m"), mm = cell("MNLI-mm");
  md << (m == "-" && mm == "-" ? std::string("-") : m + "/" + mm);
  for (const char* c : kColumns) md << " | " << cell(c);
  char avg[64];
  if (count == 9)
    std::snprintf(avg, sizeof avg, "%.2f", sum / 9.0);
  else
    std::snprintf(avg, sizeof avg, "- (%d of 9)", count);
  md << " | " << avg << " |\n\n";
}

/// One row per task: the reported metrics, the LR grid's medians, epochs, rows, runs.
void per_task_table(std::ostringstream& md, const std::vector<TaskResult>& results) {
  md << "## Per task\n\n"
     << "| task | reported (best LR) | best LR | median primary metric per LR (chosen on) | epochs | train rows | "
        "runs | skipped rows |\n"
     << "|---|---|---|---|---|---|---|---|\n";
  for (const auto& r : results) {
    const TaskSpec& task = *r.task;
    const LrSummary& best = r.by_lr.at(r.best_lr);
    std::ostringstream reported, per_lr, skipped;
    for (size_t s = 0; s < best.median.size(); ++s)
      for (const auto& [name, v] : best.median[s])
        reported << (reported.tellp() > 0 ? ", " : "") << task.dev[s].table_column << " " << name << " " << percent(v);
    for (const auto& s : r.by_lr) per_lr << (per_lr.tellp() > 0 ? ", " : "") << s.lr << ": " << percent(s.median_selection_score);
    per_lr << (r.selection_rows > 0 ? " (selection split)" : " (dev)");
    int64_t skipped_total = 0;
    for (const auto& [split, n] : r.skipped_rows) skipped_total += n;
    md << "| " << task.name << " | " << reported.str() << " | " << best.lr << " | " << per_lr.str() << " | " << r.epochs
       << " | " << r.train_rows << " of " << r.train_rows_in_file
       << (r.selection_rows > 0 ? " (" + std::to_string(r.selection_rows) + " held out for selection)" : std::string())
       << " | " << r.runs.size() << " | " << skipped_total
       << " |\n";
  }
}

}  // namespace

std::string results_markdown(const ReportHeader& header, const std::vector<TaskResult>& results) {
  std::ostringstream md;
  const bool any_glue = std::any_of(results.begin(), results.end(), [](const TaskResult& r) { return !r.task->custom; });
  if (any_glue) glue_table(md, header, results);
  else md << "# Fine-tuning results\n\n" << header.model_name << ", " << steps_text(header.pretrain_steps)
          << " of pre-training; custom task(s) only, so no GLUE row.\n\n";
  per_task_table(md, results);
  return md.str();
}


std::string prediction_text(const TaskSpec& task, const Predictions& p, size_t row) {
  if (task.kind == TaskKind::kRegression) {
    char buf[32];
    const double v = std::clamp(p.scores.at(row), task.score_min, task.score_max);
    std::snprintf(buf, sizeof buf, task.custom ? "%.9g" : "%.3f", v);
    return buf;
  }
  return task.labels.at(static_cast<size_t>(p.labels.at(row)));
}

std::string submission_text(const TaskSpec& task, const std::vector<std::string>& index, const Predictions& p) {
  const size_t n = task.kind == TaskKind::kRegression ? p.scores.size() : p.labels.size();
  TUPE_CHECK(n == index.size(), task.name << " submission: " << n << " predictions for " << index.size() << " rows");
  std::string out = "index\tprediction\n";
  for (size_t i = 0; i < n; ++i) out += index[i] + "\t" + prediction_text(task, p, i) + "\n";
  return out;
}

std::vector<fs::path> write_outputs(const fs::path& output_dir, const ReportHeader& header,
                                    const std::vector<TaskResult>& results) {
  std::error_code ec;
  fs::create_directories(output_dir / "submission", ec);
  TUPE_CHECK(!ec, (output_dir / "submission").string() << ": cannot create: " << ec.message());
  std::vector<fs::path> written;
  for (const auto& r : results) {
    for (size_t s = 0; s < r.test_specs.size(); ++s) {
      const fs::path file = output_dir / "submission" / r.test_specs[s]->submission;
      checkpoint::write_file_atomic(
          file, submission_text(*r.task, r.test_index.at(s), r.runs.at(r.submission_run).test.at(s)));
      written.push_back(file);
    }
  }
  checkpoint::write_file_atomic(output_dir / "results.json", results_json(header, results).dump(2) + "\n");
  written.push_back(output_dir / "results.json");
  checkpoint::write_file_atomic(output_dir / "results.md", results_markdown(header, results));
  written.push_back(output_dir / "results.md");
  return written;
}

}  // namespace tupe::finetune
