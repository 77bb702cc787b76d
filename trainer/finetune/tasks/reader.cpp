#include "trainer/finetune/tasks/reader.h"

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <sstream>

#include "common/error.h"
#include "common/number_syntax.h"
#include "trainer/finetune/tasks/table_formats.h"
#include "trainer/finetune/tasks/tsv.h"

namespace tupe::finetune {

namespace {

constexpr size_t kMaxSkippedMessages = 10;

/// Resolved 0-based column of `ref` in `table` (npos for an absent reference).
size_t resolve(const TsvTable& table, const ColumnRef& ref) {
  if (!ref.name.empty()) return column_index(table, ref.name);
  if (ref.position >= 0) return static_cast<size_t>(ref.position);
  return std::string::npos;
}

bool blank(const std::string& s) { return s.find_first_not_of(" \t\r\n") == std::string::npos; }

/// The score of a regression row, or nullopt when it is not a finite number in [lo, hi]
/// (the syntax of Python's float(), docs/formats.md "Numbers").
std::optional<double> parse_score(const std::string& text, double lo, double hi) {
  const std::optional<double> v = parse_finite_number(text);
  if (!v || *v < lo || *v > hi) return std::nullopt;
  return v;
}

std::string label_list(const TaskSpec& task) {
  std::ostringstream os;
  for (size_t i = 0; i < task.labels.size(); ++i) os << (i ? ", " : "") << task.labels[i];
  return os.str();
}

/// The keys a JSONL split needs, in table column order.
std::vector<std::string> jsonl_keys(const SplitSpec& split) {
  std::vector<std::string> keys;
  for (const ColumnRef* c : {&split.text_a, &split.text_b, &split.label, &split.index})
    if (!c->name.empty()) keys.push_back(c->name);
  return keys;
}

std::string score_range(const TaskSpec& task) {
  if (!std::isfinite(task.score_min) && !std::isfinite(task.score_max)) return "a finite number";
  std::ostringstream os;
  os << "a number in [" << task.score_min << ", " << task.score_max << "]";
  return os.str();
}

}  // namespace

std::string split_path(const SplitSpec& split, const std::string& glue_dir) {
  if (split.own_path) return split.file;
  return (std::filesystem::path(glue_dir) / split.file).string();
}

namespace {

/// The columns of a split's fields (std::string::npos: absent).
struct SplitColumns {
  size_t count, a, b, label, index;
};

/// Row `row` (the `ordinal`-th data row) as an example in `ex`; "" when it is usable, else
/// what is wrong with it.
std::string read_row(const TaskSpec& task, const SplitSpec& split, const SplitColumns& c, const TsvRow& row,
                     int64_t ordinal, Example& ex) {
  ex.line = row.line;
  if (!row.problem.empty()) return row.problem;
  if (row.fields.size() != c.count) {
    std::ostringstream os;
    os << "expected " << c.count << " columns" << (split.header ? " (as the header)" : "") << ", got "
       << row.fields.size() << (row.fields.size() == 1 && row.fields[0].empty() ? " (empty line)" : "");
    return os.str();
  }
  ex.text_a = row.fields[c.a];
  if (c.b != std::string::npos) ex.text_b = row.fields[c.b];
  if (blank(ex.text_a))
    return "empty text in column '" + (split.text_a.name.empty() ? std::to_string(c.a + 1) : split.text_a.name) + "'";
  if (c.b != std::string::npos && blank(ex.text_b))
    return "empty text in column '" + (split.text_b.name.empty() ? std::to_string(c.b + 1) : split.text_b.name) + "'";
  if (c.label != std::string::npos) {
    const std::string& text = row.fields[c.label];
    if (task.kind == TaskKind::kRegression) {
      const auto score = parse_score(text, task.score_min, task.score_max);
      if (!score) return "score '" + text + "' is not " + score_range(task);
      ex.score = *score;
    } else {
      ex.label = label_id(task, text);
      if (ex.label < 0) return "unknown label '" + text + "' (expected " + label_list(task) + ")";
    }
  }
  if (c.index != std::string::npos) {
    ex.index = row.fields[c.index];
    if (blank(ex.index)) return "empty index";
  } else if (!split.submission.empty()) {
    ex.index = std::to_string(ordinal);
  }
  return "";
}

}  // namespace

SplitData read_split(const TaskSpec& task, const SplitSpec& split, const std::string& glue_dir,
                     const ReadOptions& options) {
  SplitData out;
  out.task = task.name;
  out.split = split.name;
  out.path = split_path(split, glue_dir);
  out.labelled = split.labelled();
  TUPE_CHECK(std::filesystem::is_regular_file(out.path),
             out.path << ": no such file (" << task.name << " " << split.name << " split)");
  const TsvTable table = read_table(out.path, split.format, split.header, jsonl_keys(split));
  const SplitColumns columns{split.header ? table.header.size() : static_cast<size_t>(split.num_columns),
                             resolve(table, split.text_a), resolve(table, split.text_b), resolve(table, split.label),
                             resolve(table, split.index)};
  int64_t ordinal = -1;  // 0-based data row: the submission id of a test file without an index column
  for (const TsvRow& row : table.rows) {
    Example ex;
    const std::string problem = read_row(task, split, columns, row, ++ordinal, ex);
    if (problem.empty()) {
      out.examples.push_back(std::move(ex));
      continue;
    }
    std::ostringstream msg;
    msg << out.path << ":" << row.line << ": " << problem;
    TUPE_CHECK(options.skip_bad_rows, msg.str() << " (--skip-bad-rows skips such rows)");
    ++out.skipped_rows;
    if (out.skipped.size() < kMaxSkippedMessages) out.skipped.push_back(msg.str());
  }
  TUPE_CHECK(!out.examples.empty(),
             out.path << ": no usable rows (" << table.rows.size() << " rows, " << out.skipped_rows << " skipped)");
  return out;
}

}  // namespace tupe::finetune
