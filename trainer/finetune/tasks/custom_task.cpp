#include "trainer/finetune/tasks/custom_task.h"

#include <cctype>
#include <cmath>
#include <limits>
#include <set>
#include <sstream>

#include "common/error.h"

namespace tupe::finetune {

namespace {

std::string extension_lower(const std::string& path) {
  const size_t dot = path.find_last_of('.'), slash = path.find_last_of('/');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) return "";
  std::string ext = path.substr(dot + 1);
  for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return ext;
}

std::vector<std::string> metric_list(const TaskOptions& c) {
  if (!c.metrics.empty()) return split_comma_list(c.metrics);
  if (c.kind == TaskKind::kRegression) return {"pearson", "spearman"};
  return {"accuracy"};
}

}  // namespace

const FieldTable<TaskOptions>& TaskOptions::fields() {
  using S = TaskOptions;
  static const FieldTable<S> table = [] {
    FieldTable<S> t("task");
    t.text("name", &S::name, "",
           "custom task name, run when finetune.tasks lists it (\"\" = none; letters, digits, . _ -; not a GLUE task's)")
        .path("train", &S::train, "", "train file (TSV, CSV or JSONL)")
        .path("dev", &S::dev, "", "dev file, labelled (picks the epoch and the learning rate)")
        .path("test", &S::test, "", "test file for the submission predictions (\"\" = none)")
        .choice("format", &S::format, kTableFormatWords, TableFormat::kAuto,
                "file format; auto = by extension (.tsv .csv .jsonl .json)")
        .text("text_a", &S::text_a, "", "column (header name) or JSONL key of the first text")
        .text("text_b", &S::text_b, "", "column or key of the second text (\"\" = single-text task)")
        .text("label", &S::label, "label", "column or key of the gold label (classification) or number (regression)")
        .text("index", &S::index, "", "test file: column or key of the id in the submission (\"\" = row number from 0)")
        .choice("kind", &S::kind, kTaskKindWords, TaskKind::kClassification, "what the sentence head predicts")
        .text("labels", &S::labels, "",
              "classification: label values in id order, comma-separated (F1: the second is positive)")
        .text("metrics", &S::metrics, "",
              "metrics, primary first: accuracy, f1, mcc (classification); pearson, spearman (regression); \"\" = "
              "accuracy / pearson,spearman")
        .integer("epochs", &S::epochs, 10, "", "training epochs when finetune.epochs = 0")
        .positive();
    return t;
  }();
  return table;
}

TableFormat resolve_table_format(TableFormat format, const std::string& path, const std::string& key) {
  if (format != TableFormat::kAuto) return format;
  const std::string ext = extension_lower(path);
  if (ext == "tsv") return TableFormat::kTsv;
  if (ext == "csv") return TableFormat::kCsv;
  if (ext == "jsonl" || ext == "json") return TableFormat::kJsonl;
  TUPE_FAIL(key << ": cannot tell the format of '" << path << "' from its extension (.tsv, .csv, .jsonl); set task.format");
}

void TaskOptions::check_values() const {
  fields().check(*this);
  if (name.empty()) return;  // no custom task: the other keys are not used
  for (char c : name)
    TUPE_CHECK(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-',
               "task.name: '" << name << "' may hold letters, digits, '.', '_' and '-' only");
  bool glue = true;
  try {
    find_task(name, "task.name");
  } catch (const Error&) {
    glue = false;
  }
  TUPE_CHECK(!glue, "task.name: '" << name << "' is a GLUE task's name; choose another");
  TUPE_CHECK(name != "all", "task.name: 'all' is reserved (finetune.tasks = all means the GLUE tasks)");
  if (!train.empty()) resolve_table_format(format, train, "task.train");
  if (!dev.empty()) resolve_table_format(format, dev, "task.dev");
  if (!test.empty()) resolve_table_format(format, test, "task.test");
  const auto distinct = [](const std::string& x, const std::string& y) { return x.empty() || y.empty() || x != y; };
  TUPE_CHECK(distinct(text_a, text_b) && distinct(text_a, label) && distinct(text_b, label),
             "task: text_a, text_b and label must name different columns");
  const auto values = split_comma_list(labels);
  if (kind == TaskKind::kClassification) {
    TUPE_CHECK(values.empty() || values.size() >= 2,
               "task.labels: a classification task needs at least 2 label values, got '" << labels << "'");
    TUPE_CHECK(std::set<std::string>(values.begin(), values.end()).size() == values.size(),
               "task.labels: a label value is listed twice in '" << labels << "'");
  } else {
    TUPE_CHECK(values.empty(), "task.labels: a regression task has no label values (got '" << labels << "')");
  }
  const bool regression = kind == TaskKind::kRegression;
  const std::set<std::string> allowed =
      regression ? std::set<std::string>{"pearson", "spearman"} : std::set<std::string>{"accuracy", "f1", "mcc"};
  const auto m = metric_list(*this);
  TUPE_CHECK(!m.empty(), "task.metrics: no metric given");
  for (const auto& x : m)
    TUPE_CHECK(allowed.count(x), "task.metrics: '" << x << "' is not a " << to_string(kind) << " metric ("
                                                   << (regression ? "pearson, spearman" : "accuracy, f1, mcc") << ")");
  TUPE_CHECK(std::set<std::string>(m.begin(), m.end()).size() == m.size(), "task.metrics: a metric is listed twice");
}

void TaskOptions::validate() const {
  check_values();
  if (!name.empty()) {
    TUPE_CHECK(!train.empty(), "task.train: no train file given (task " << name << ")");
    TUPE_CHECK(!dev.empty(),
               "task.dev: no dev file given (task " << name << "; it picks the epoch and the learning rate)");
    TUPE_CHECK(!text_a.empty(), "task.text_a: no column of the first text given");
    TUPE_CHECK(!label.empty(), "task.label: no label column given");
    TUPE_CHECK(kind != TaskKind::kClassification || split_comma_list(labels).size() >= 2,
               "task.labels: a classification task needs at least 2 label values, got '" << labels << "'");
  }
}

TaskSpec custom_task_spec(const TaskOptions& c) {
  c.validate();
  TUPE_CHECK(c.enabled(), "task.name: no custom task configured");
  TaskSpec t;
  t.name = c.name;
  t.custom = true;
  t.kind = c.kind;
  t.labels = t.kind == TaskKind::kClassification ? split_comma_list(c.labels) : std::vector<std::string>{};
  t.paper_epochs = c.epochs;
  t.metrics = metric_list(c);
  t.primary_metric = t.metrics.front();
  if (t.kind == TaskKind::kRegression) {
    t.score_min = -std::numeric_limits<double>::infinity();
    t.score_max = std::numeric_limits<double>::infinity();
  }
  auto split = [&](const std::string& name, const std::string& file, const std::string& key, bool labelled) {
    SplitSpec s;
    s.name = name;
    s.file = file;
    s.own_path = true;
    s.format = resolve_table_format(c.format, file, key);
    s.text_a = {c.text_a, -1};
    s.text_b = {c.text_b, -1};
    if (labelled) s.label = {c.label, -1};
    return s;
  };
  t.train = split("train", c.train, "task.train", true);
  SplitSpec dev = split("dev", c.dev, "task.dev", true);
  dev.table_column = c.name;
  t.dev = {dev};
  if (!c.test.empty()) {
    SplitSpec test = split("test", c.test, "task.test", false);
    test.index = {c.index, -1};
    test.submission = c.name + ".tsv";
    t.test = {test};
  }
  return t;
}

bool custom_task_from_saved(const KeyValues& saved, const std::string& where, TaskOptions* out) {
  KeyValues kv;
  for (const auto& [k, v] : saved)
    if (k.rfind("task.", 0) == 0) kv[k.substr(5)] = v;
  TaskOptions c;
  TaskOptions::fields().apply(c, kv, where + " [task]");
  if (!c.enabled()) return false;
  try {
    c.validate();
  } catch (const Error& e) {
    TUPE_FAIL(where << ": saved " << e.what());
  }
  *out = c;
  return true;
}

const TaskSpec& saved_model_task(const std::string& name, const KeyValues& saved, const TaskOptions& given,
                                 const std::string& where, TaskSpec* storage) {
  if (given.enabled() && given.name == name) {
    *storage = custom_task_spec(given);
    return *storage;
  }
  TaskOptions recorded;
  if (custom_task_from_saved(saved, where, &recorded) && recorded.name == name) {
    *storage = custom_task_spec(recorded);
    return *storage;
  }
  return find_task(name, where);
}

}  // namespace tupe::finetune
