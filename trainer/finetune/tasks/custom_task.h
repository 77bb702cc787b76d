// A downstream task of the user's own, described in the config's [task] section and
// fine-tuned by `tupe finetune` exactly as a GLUE task (the same protocol, metrics, bad-row
// handling and reports). One custom task per config; `finetune.tasks` names it (alone or
// next to GLUE tasks). Keys of [task] (see fields() for the --help text):
//   name     the task's name: finetune.tasks lists it; models/<name>, submission/<name>.tsv
//   train, dev, test   the files, paths as given (relative to the working folder); dev is
//            labelled (it picks the epoch and the LR); test is optional and may be unlabelled
//   format   auto (by extension: .tsv, .csv, .jsonl/.json) | tsv | csv | jsonl
//   text_a, text_b     column (TSV/CSV header name) or JSONL key of the text(s); text_b "" =
//            single-text task
//   label    column or key of the gold label (classification) or number (regression)
//   index    test file: column or key of the submission id ("" = the row number from 0)
//   kind     classification | regression
//   labels   classification: the label values in id order (F1 counts the second as positive)
//   metrics  primary first; default accuracy (classification), pearson,spearman (regression)
//   epochs   training epochs when finetune.epochs = 0
// Example (configs/glue/custom-sst2.ini):
//   [task]
//   name = movie-reviews
//   train = ../shared/data/glue/SST-2/train.tsv
//   dev = ../shared/data/glue/SST-2/dev.tsv
//   text_a = sentence
//   labels = 0,1
//   metrics = accuracy,f1,mcc
// File formats: TSV as GLUE's (header line, TAB-separated, no quoting); CSV per RFC 4180
// (header line, quoted fields with "" and embedded commas and line breaks; trainer/finetune/
// table_formats.h); JSONL one object per line (numbers and booleans as their JSON text).
#pragma once
#include <cstdint>
#include <string>

#include "common/config_fields.h"
#include "trainer/finetune/tasks/tasks.h"

namespace tupe::finetune {

/// [task] section. Every field -- its meaning, default and range -- is described once, in the
/// field table in custom_task.cpp (common/config_fields.h; docs/config.md).
struct TaskOptions {
  TaskOptions() { fields().reset(*this); }
  std::string name;
  std::string train;
  std::string dev;
  std::string test;
  TableFormat format;
  std::string text_a;
  std::string text_b;
  std::string label;
  std::string index;
  TaskKind kind;
  std::string labels;
  std::string metrics;
  int64_t epochs;

  bool enabled() const { return !name.empty(); }
  /// The values given: the field table's ranges and, when a task is named, the name, the
  /// formats of the files named, distinct columns, labels and metrics that fit the kind.
  /// Throws tupe::Error "task.<key>: <cause>" (what other subcommands check of a [task]
  /// section they do not read; cli/config_cli.h). Pure: files are not opened.
  void check_values() const;
  /// check_values(), and, when a task is named, what fine-tuning needs: train and dev files,
  /// the text and label columns, a classification task's labels. Throws tupe::Error
  /// "task.<key>: <cause>" (pure: files are not opened).
  void validate() const;
  static const FieldTable<TaskOptions>& fields();
};

/// The file format of `path` under `format` (auto: by extension; never kAuto). Throws
/// tupe::Error "<key>: ..." when auto cannot tell.
TableFormat resolve_table_format(TableFormat format, const std::string& path, const std::string& key);

/// The TaskSpec of a validated, enabled config: splits "train", "dev" (table column = name),
/// "test" (submission <name>.tsv) with the files as given.
TaskSpec custom_task_spec(const TaskOptions& config);

/// The custom task a saved config ("task.*" keys of a fine-tuned model) describes into `out`;
/// false when the keys name no task. Throws tupe::Error "<where>: ..." on bad keys.
bool custom_task_from_saved(const KeyValues& saved, const std::string& where, TaskOptions* out);

/// The task of a fine-tuned model whose "glue.task" is `name`: `given` (the [task] section of
/// the command, e.g. new file paths) when it has that name, else the custom task its saved
/// config describes, else the GLUE task. `storage` holds a custom spec. Throws tupe::Error
/// "<where>: unknown GLUE task ..." when none fits.
const TaskSpec& saved_model_task(const std::string& name, const KeyValues& saved, const TaskOptions& given,
                                 const std::string& where, TaskSpec* storage);

}  // namespace tupe::finetune
