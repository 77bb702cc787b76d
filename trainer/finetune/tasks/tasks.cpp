#include "trainer/finetune/tasks/tasks.h"

#include <algorithm>
#include <cctype>
#include <set>
#include <sstream>

#include "common/config_fields.h"
#include "common/error.h"

namespace tupe::finetune {

namespace {

ColumnRef col(const std::string& name) { return {name, -1}; }
ColumnRef pos(int64_t position) { return {"", position}; }

/// A headered split with columns by name.
SplitSpec named_split(std::string name, std::string file, std::string a, std::string b, std::string label,
                      std::string index = "") {
  SplitSpec s;
  s.name = std::move(name);
  s.file = std::move(file);
  s.text_a = col(a);
  s.text_b = col(b);
  s.label = col(label);
  s.index = col(index);
  return s;
}

SplitSpec dev_split(std::string name, std::string file, std::string a, std::string b, std::string label,
                    std::string table_column) {
  SplitSpec s = named_split(std::move(name), std::move(file), std::move(a), std::move(b), std::move(label));
  s.table_column = std::move(table_column);
  return s;
}

SplitSpec test_split(std::string name, std::string file, std::string index, std::string a, std::string b,
                     std::string submission) {
  SplitSpec s = named_split(std::move(name), std::move(file), std::move(a), std::move(b), "", std::move(index));
  s.submission = std::move(submission);
  return s;
}

/// A two-sentence classification task with the same column names in train and dev.
TaskSpec pair_task(const std::string& name, std::vector<std::string> labels, int64_t epochs, const std::string& a,
                   const std::string& b, const std::string& label, const std::string& table_column,
                   const std::string& test_index = "index") {
  TaskSpec t;
  t.name = name;
  t.labels = std::move(labels);
  t.paper_epochs = epochs;
  t.primary_metric = "accuracy";
  t.train = named_split("train", name + "/train.tsv", a, b, label);
  t.dev = {dev_split("dev", name + "/dev.tsv", a, b, label, table_column)};
  t.test = {test_split("test", name + "/test.tsv", test_index, a, b, name + ".tsv")};
  return t;
}

/// CoLA: train/dev without a header: source, label, original-label mark, sentence.
TaskSpec cola_task() {
  TaskSpec cola;
  cola.name = "CoLA";
  cola.labels = {"0", "1"};
  cola.primary_metric = "mcc";
  SplitSpec cola_train;
  cola_train.name = "train";
  cola_train.file = "CoLA/train.tsv";
  cola_train.header = false;
  cola_train.num_columns = 4;
  cola_train.text_a = pos(3);
  cola_train.label = pos(1);
  cola.train = cola_train;
  SplitSpec cola_dev = cola_train;
  cola_dev.name = "dev";
  cola_dev.file = "CoLA/dev.tsv";
  cola_dev.table_column = "CoLA";
  cola.dev = {cola_dev};
  cola.test = {test_split("test", "CoLA/test.tsv", "index", "sentence", "", "CoLA.tsv")};
  return cola;
}

/// MNLI: two dev and two test splits (matched, mismatched) and the diagnostic set.
TaskSpec mnli_task() {
  TaskSpec mnli;
  mnli.name = "MNLI";
  mnli.labels = {"entailment", "neutral", "contradiction"};
  mnli.paper_epochs = 5;
  mnli.primary_metric = "accuracy";
  mnli.train = named_split("train", "MNLI/train.tsv", "sentence1", "sentence2", "gold_label");
  mnli.dev = {
      dev_split("dev_matched", "MNLI/dev_matched.tsv", "sentence1", "sentence2", "gold_label", "MNLI-m"),
      dev_split("dev_mismatched", "MNLI/dev_mismatched.tsv", "sentence1", "sentence2", "gold_label", "MNLI-mm")};
  mnli.test = {
      test_split("test_matched", "MNLI/test_matched.tsv", "index", "sentence1", "sentence2", "MNLI-m.tsv"),
      test_split("test_mismatched", "MNLI/test_mismatched.tsv", "index", "sentence1", "sentence2", "MNLI-mm.tsv"),
      test_split("diagnostic", "diagnostic/diagnostic.tsv", "index", "sentence1", "sentence2", "AX.tsv")};
  return mnli;
}

std::vector<TaskSpec> build_tasks() {
  std::vector<TaskSpec> tasks;

  tasks.push_back(cola_task());

  TaskSpec sst;
  sst.name = "SST-2";
  sst.labels = {"0", "1"};
  sst.primary_metric = "accuracy";
  sst.train = named_split("train", "SST-2/train.tsv", "sentence", "", "label");
  sst.dev = {dev_split("dev", "SST-2/dev.tsv", "sentence", "", "label", "SST")};
  sst.test = {test_split("test", "SST-2/test.tsv", "index", "sentence", "", "SST-2.tsv")};
  tasks.push_back(sst);

  tasks.push_back(pair_task("MRPC", {"0", "1"}, 10, "#1 String", "#2 String", "Quality", "MRPC"));

  TaskSpec sts = pair_task("STS-B", {}, 10, "sentence1", "sentence2", "score", "STS");
  sts.kind = TaskKind::kRegression;
  sts.primary_metric = "pearson";
  tasks.push_back(sts);

  tasks.push_back(pair_task("QQP", {"0", "1"}, 5, "question1", "question2", "is_duplicate", "QQP", "id"));

  tasks.push_back(mnli_task());

  tasks.push_back(pair_task("QNLI", {"entailment", "not_entailment"}, 5, "question", "sentence", "label", "QNLI"));
  tasks.push_back(pair_task("RTE", {"entailment", "not_entailment"}, 10, "sentence1", "sentence2", "label", "RTE"));
  tasks.push_back(pair_task("WNLI", {"0", "1"}, 10, "sentence1", "sentence2", "label", "WNLI"));
  return tasks;
}

/// Lower-case, without '-' and '_': "SST-2" -> "sst2".
std::string fold(const std::string& s) {
  std::string out;
  for (char c : s)
    if (c != '-' && c != '_') out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

}  // namespace

std::string to_string(TaskKind k) { return choice_word(k, kTaskKindWords); }

TaskKind parse_task_kind(const std::string& key, const std::string& text) {
  return parse_choice(key, text, kTaskKindWords);
}

const std::vector<TaskSpec>& all_tasks() {
  static const std::vector<TaskSpec> tasks = build_tasks();
  return tasks;
}

const TaskSpec& find_task(const std::string& name, const std::string& where) {
  for (const auto& t : all_tasks())
    if (fold(t.name) == fold(name)) return t;
  std::ostringstream names;
  for (const auto& t : all_tasks()) names << (&t == &all_tasks().front() ? "" : ", ") << t.name;
  TUPE_FAIL(where << ": unknown GLUE task '" << name << "' (tasks: " << names.str() << ")");
}

std::vector<const TaskSpec*> parse_task_list(const std::string& text, const std::string& where,
                                             const TaskSpec* custom) {
  std::vector<const TaskSpec*> out;
  if (trim(text) == "all") {
    for (const auto& t : all_tasks()) out.push_back(&t);
    return out;
  }
  std::set<std::string> seen;
  for (const std::string& item : split_comma_list(text)) {
    const TaskSpec* found = custom && fold(custom->name) == fold(item) ? custom : nullptr;
    if (!found) {
      try {
        found = &find_task(item, where);
      } catch (const Error& e) {
        TUPE_FAIL(e.what() << (custom ? "; the [task] section describes '" + custom->name + "'"
                                      : std::string("; a task of your own needs a [task] section of that name")));
      }
    }
    const TaskSpec& t = *found;
    TUPE_CHECK(seen.insert(t.name).second, where << ": task " << t.name << " listed twice");
    out.push_back(&t);
  }
  TUPE_CHECK(!out.empty(), where << ": no task given (a comma-separated list of GLUE tasks, or all)");
  return out;
}

void check_task_list_syntax(const std::string& text, const std::string& where) {
  if (trim(text) == "all") return;
  std::set<std::string> seen;
  for (const std::string& item : split_comma_list(text))
    TUPE_CHECK(seen.insert(fold(item)).second, where << ": task " << item << " listed twice");
  TUPE_CHECK(!seen.empty(), where << ": no task given (a comma-separated list of GLUE tasks, or all)");
}

int64_t label_id(const TaskSpec& task, const std::string& text) {
  for (size_t i = 0; i < task.labels.size(); ++i)
    if (task.labels[i] == text) return static_cast<int64_t>(i);
  return -1;
}

}  // namespace tupe::finetune
