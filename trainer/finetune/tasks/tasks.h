// The nine GLUE tasks and the diagnostic set, as the GLUE download script lays out their
// files (docs/formats.md "GLUE task files") and as the paper fine-tunes them (docs/model.md "The paper's
// settings"): columns by header name where there is a header (CoLA train/dev have none),
// the label names in id order, the dev splits and their metrics, the test splits with the
// benchmark's submission file names, and the paper's epochs per task.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "common/config_fields.h"
#include "trainer/finetune/tasks/table_formats.h"

namespace tupe::finetune {

/// What a task predicts (a custom task's task.kind).
enum class TaskKind {
  kClassification,  ///< cross-entropy over the label names
  kRegression,      ///< STS-B: one output, mean squared error against the float score
};
/// The words of TaskKind in configs and reports.
inline constexpr Choice<TaskKind> kTaskKindWords[] = {{"classification", TaskKind::kClassification},
                                                      {"regression", TaskKind::kRegression}};
/// "classification" | "regression".
std::string to_string(TaskKind k);
/// Parses a word of kTaskKindWords; throws tupe::Error "<key>: expected classification or regression, got '<text>'".
TaskKind parse_task_kind(const std::string& key, const std::string& text);

/// A column: by header name, or by 0-based position in a header-less file.
struct ColumnRef {
  std::string name;      ///< header name ("" when positional)
  int64_t position = -1; ///< 0-based column (header-less files only)
};

/// One file of a task and where its columns are.
struct SplitSpec {
  std::string name;        ///< "train", "dev", "dev_matched", "test", "diagnostic", ...
  std::string file;        ///< path relative to the GLUE folder, e.g. "SST-2/train.tsv"
  bool header = true;      ///< first line names the columns
  int64_t num_columns = 0; ///< header-less files: the exact column count; 0 = as the header
  ColumnRef text_a;        ///< first sentence
  ColumnRef text_b;        ///< second sentence (name "" and position -1: single-sentence task)
  ColumnRef label;         ///< gold label or score (unlabelled test files: none)
  ColumnRef index;         ///< the id written to the submission file (test files)
  std::string submission;  ///< test files: submission file name, e.g. "SST-2.tsv"; "" otherwise
  std::string table_column;///< dev files: column of the results table, e.g. "MNLI-m"
  TableFormat format = TableFormat::kTsv;  ///< tsv (GLUE's) | csv (RFC 4180) | jsonl (table_formats.h); never auto
  bool own_path = false;   ///< `file` is used as given (custom tasks), not under the GLUE folder
  bool labelled() const { return !label.name.empty() || label.position >= 0; }
  bool pair() const { return !text_b.name.empty() || text_b.position >= 0; }
};

struct TaskSpec {
  std::string name;                ///< "CoLA", "SST-2", "MRPC", "STS-B", "QQP", "MNLI", "QNLI", "RTE", "WNLI"
  TaskKind kind = TaskKind::kClassification;
  std::vector<std::string> labels; ///< label text in id order (classification); empty for regression
  int64_t paper_epochs = 10;       ///< docs/model.md: 10 epochs, 5 for MNLI, QNLI and QQP
  /// Metric that picks the epoch and the learning rate: "mcc" (CoLA), "pearson" (STS-B),
  /// "accuracy" (the others; MNLI: of the first dev split, matched).
  std::string primary_metric;
  SplitSpec train;
  std::vector<SplitSpec> dev;      ///< labelled evaluation files (MNLI: matched, mismatched)
  std::vector<SplitSpec> test;     ///< unlabelled files for submission (MNLI: + the diagnostic set AX)
  /// Metrics reported, primary first; empty = GLUE's rule (metrics.h metric_names).
  std::vector<std::string> metrics;
  double score_min = 0, score_max = 5;  ///< regression: gold scores outside are bad rows; predictions clipped
  bool custom = false;             ///< described by the config's [task] section (custom_task.h)

  /// Outputs of the sentence head: the number of labels, 1 for regression.
  int64_t num_outputs() const { return kind == TaskKind::kRegression ? 1 : static_cast<int64_t>(labels.size()); }
};

/// All nine tasks in the order of the GLUE benchmark.
const std::vector<TaskSpec>& all_tasks();

/// The task called `name` (case-insensitive; "-" optional: "sst2", "STS-B", "mnli").
/// Throws tupe::Error "<where>: unknown GLUE task '<name>' (tasks: ...)".
const TaskSpec& find_task(const std::string& name, const std::string& where);

/// Parses "all" (the nine GLUE tasks) or a comma-separated list of task names into specs (in
/// the given order, duplicates refused); `custom` (may be null) is a task of the config's
/// [task] section, found by its name. Throws tupe::Error naming `where`.
std::vector<const TaskSpec*> parse_task_list(const std::string& text, const std::string& where,
                                             const TaskSpec* custom = nullptr);

/// Checks the syntax of a task list without resolving names (a custom task's name is known
/// only with its [task] section): items non-empty, none twice. Throws tupe::Error naming `where`.
void check_task_list_syntax(const std::string& text, const std::string& where);

/// The label id of `text` for `task`, or -1 when it is not one of its label names.
int64_t label_id(const TaskSpec& task, const std::string& text);

}  // namespace tupe::finetune
