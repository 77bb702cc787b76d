// Custom tasks (trainer/finetune/tasks/custom_task.h) and their file formats (table_formats.h): the
// RFC 4180 CSV reader on hand-made edge cases and against Python's csv writer on SST-2 rows,
// the JSONL reader, bad rows through read_split, and the [task] section's checks.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/finetune/glue_test_util.h"
#include "trainer/finetune/metrics.h"
#include "trainer/finetune/tasks/custom_task.h"
#include "trainer/finetune/tasks/reader.h"
#include "trainer/finetune/tasks/table_formats.h"

namespace tupe::finetune {
namespace {

using testing::error_of;
using testing::ScratchDir;
using testing::write_text;
using Fields = std::vector<std::string>;

TEST(GlueCustomCsv, QuotesCommasLineBreaksAndLineNumbers) {
  const std::string text =
      "\xEF\xBB\xBF" "id,text,label\r\n"
      "1,plain,0\r\n"
      "2,\"with, comma\",1\n"
      "3,\"say \"\"hi\"\"\",0\r\n"
      "4,\"two\nlines\",1\n"
      "5,\"crlf\r\ninside\",0\n"
      "6,,1\n"
      "7,bare \"quote\" kept,0\n"
      "\n"
      "8,\"\",1";  // last record without its line end
  const TsvTable t = parse_csv(text, "x.csv");
  EXPECT_EQ(t.header, (Fields{"id", "text", "label"}));
  ASSERT_EQ(t.rows.size(), 9u);
  EXPECT_EQ(t.rows[0].fields, (Fields{"1", "plain", "0"}));
  EXPECT_EQ(t.rows[1].fields, (Fields{"2", "with, comma", "1"}));
  EXPECT_EQ(t.rows[2].fields, (Fields{"3", "say \"hi\"", "0"}));
  EXPECT_EQ(t.rows[3].fields, (Fields{"4", "two\nlines", "1"}));
  EXPECT_EQ(t.rows[4].fields, (Fields{"5", "crlf\r\ninside", "0"}));
  EXPECT_EQ(t.rows[5].fields, (Fields{"6", "", "1"}));
  EXPECT_EQ(t.rows[6].fields, (Fields{"7", "bare \"quote\" kept", "0"}));
  EXPECT_EQ(t.rows[7].fields, (Fields{""}));  // an empty line: one empty field (a bad row for the reader)
  EXPECT_EQ(t.rows[8].fields, (Fields{"8", "", "1"}));
  // Line numbers: where each record starts (record 4 spans lines 6-7, record 5 lines 8-9).
  std::vector<int64_t> lines;
  for (const auto& r : t.rows) lines.push_back(r.line);
  EXPECT_EQ(lines, (std::vector<int64_t>{2, 3, 4, 5, 7, 9, 10, 11, 12}));
}

TEST(GlueCustomCsv, SyntaxErrorsNameTheLine) {
  EXPECT_EQ(error_of([] { parse_csv("a,b\n1,\"open\n2,3\n", "x.csv"); }),
            "x.csv:2: a quoted field opened on this line is never closed");
  EXPECT_NE(error_of([] { parse_csv("a,b\n1,2\n3,\"q\"x\n", "x.csv"); }).find("x.csv:3: 'x' after a closing quote"),
            std::string::npos);
  EXPECT_EQ(error_of([] { parse_csv("", "x.csv"); }), "x.csv: empty file (expected a header line)");
  EXPECT_NE(error_of([] { parse_csv(std::string("a,b\n1,x\0y\n", 10), "x.csv"); }).find("x.csv:2: NUL byte"), std::string::npos);
}

TEST(GlueCustomCsv, AgreesWithPythonsCsvWriterOnSst2Rows) {
  ScratchDir dir;
  std::string out;
  const auto csv = dir.path() / "sst.csv", ref = dir.path() / "sst.json";
  ASSERT_EQ(testing::run_python("csv_ref.py", testing::glue_dir() + "/SST-2/dev.tsv " + csv.string() + " " + ref.string(), &out), 0)
      << out;
  const nlohmann::json want = nlohmann::json::parse(testing::read_text(ref));
  const TsvTable t = read_csv(csv.string());
  EXPECT_EQ(t.header, want["header"].get<Fields>());
  ASSERT_EQ(t.rows.size(), want["rows"].size());
  for (size_t i = 0; i < t.rows.size(); ++i) ASSERT_EQ(t.rows[i].fields, want["rows"][i].get<Fields>()) << "row " << i;
}

TEST(GlueCustomJsonl, FieldsAndBadRows) {
  const std::string text =
      "{\"s\": \"a text\", \"y\": 1, \"z\": 4.5}\n"
      "{\"s\": \"b\", \"y\": true, \"z\": \"x\"}\r\n"
      "not json\n"
      "[1, 2]\n"
      "{\"s\": \"c\"}\n"
      "{\"s\": null, \"y\": 0}\n"
      "\n"
      "{\"s\": \"\\u00e9t\\u00e9\", \"y\": \"0\"}";
  const TsvTable t = parse_jsonl(text, "x.jsonl", {"s", "y"});
  EXPECT_EQ(t.header, (Fields{"s", "y"}));
  ASSERT_EQ(t.rows.size(), 8u);
  EXPECT_EQ(t.rows[0].fields, (Fields{"a text", "1"}));
  EXPECT_EQ(t.rows[1].fields, (Fields{"b", "true"}));
  EXPECT_NE(t.rows[2].problem.find("not valid JSON"), std::string::npos);
  EXPECT_EQ(t.rows[3].problem, "not a JSON object");
  EXPECT_EQ(t.rows[4].problem, "no key 'y'");
  EXPECT_EQ(t.rows[5].problem, "key 's' holds null, not a string, number or boolean");
  EXPECT_EQ(t.rows[6].problem, "empty line");
  EXPECT_EQ(t.rows[7].fields, (Fields{"\xC3\xA9t\xC3\xA9", "0"}));
  EXPECT_EQ(t.rows[7].line, 8);
}

TaskOptions csv_task(const std::string& dir) {
  TaskOptions c;
  c.name = "sentiment";
  c.train = dir + "/train.csv";
  c.dev = dir + "/dev.csv";
  c.test = dir + "/test.csv";
  c.text_a = "text";
  c.label = "label";
  c.labels = "neg,pos";
  c.metrics = "mcc,accuracy,f1";
  return c;
}

TEST(GlueCustomTask, CsvClassificationSplitsWithBadRows) {
  ScratchDir dir;
  write_text(dir.path() / "train.csv", "text,label\n\"good, fine\",pos\nbad,neg\nodd,maybe\n\"x\",pos,extra\n");
  write_text(dir.path() / "dev.csv", "text,label\nok,pos\n");
  write_text(dir.path() / "test.csv", "text\nfirst\nsecond\n");
  const TaskSpec task = custom_task_spec(csv_task(dir.str()));
  EXPECT_TRUE(task.custom);
  EXPECT_EQ(task.labels, (Fields{"neg", "pos"}));
  EXPECT_EQ(metric_names(task), (Fields{"mcc", "accuracy", "f1"}));
  EXPECT_EQ(task.primary_metric, "mcc");
  EXPECT_EQ(task.dev.at(0).table_column, "sentiment");
  EXPECT_EQ(task.test.at(0).submission, "sentiment.tsv");
  const std::string train = dir.str() + "/train.csv";
  EXPECT_EQ(error_of([&] { read_split(task, task.train, "/unused"); }),
            train + ":4: unknown label 'maybe' (expected neg, pos) (--skip-bad-rows skips such rows)");
  const SplitData skipped = read_split(task, task.train, "/unused", ReadOptions{true});
  ASSERT_EQ(skipped.examples.size(), 2u);
  EXPECT_EQ(skipped.examples[0].text_a, "good, fine");
  EXPECT_EQ(skipped.examples[0].label, 1);
  EXPECT_EQ(skipped.skipped_rows, 2);
  EXPECT_EQ(skipped.skipped.at(1), train + ":5: expected 2 columns (as the header), got 3");
  const SplitData test = read_split(task, task.test.at(0), "/unused");
  ASSERT_EQ(test.examples.size(), 2u);
  EXPECT_EQ(test.examples[1].index, "1");  // no index column: the row number from 0
}

TEST(GlueCustomTask, JsonlRegressionTakesAnyFiniteScore) {
  ScratchDir dir;
  write_text(dir.path() / "train.jsonl",
             "{\"a\": \"x\", \"b\": \"y\", \"score\": -2.5}\n{\"a\": \"x\", \"b\": \"y\", \"score\": \"nan\"}\n"
             "{\"a\": \"x\", \"score\": 1}\n");
  write_text(dir.path() / "dev.jsonl", "{\"a\": \"x\", \"b\": \"y\", \"score\": 7}\n");
  TaskOptions c;
  c.name = "similarity";
  c.train = dir.str() + "/train.jsonl";
  c.dev = dir.str() + "/dev.jsonl";
  c.text_a = "a";
  c.text_b = "b";
  c.label = "score";
  c.kind = TaskKind::kRegression;
  const TaskSpec task = custom_task_spec(c);
  EXPECT_EQ(metric_names(task), (Fields{"pearson", "spearman"}));
  const SplitData train = read_split(task, task.train, "", ReadOptions{true});
  ASSERT_EQ(train.examples.size(), 1u);
  EXPECT_DOUBLE_EQ(train.examples[0].score, -2.5);
  EXPECT_EQ(train.skipped.at(0), c.train + ":2: score 'nan' is not a finite number");
  EXPECT_EQ(train.skipped.at(1), c.train + ":3: no key 'b'");
  EXPECT_DOUBLE_EQ(read_split(task, task.dev.at(0), "").examples.at(0).score, 7.0);
}

TEST(GlueCustomTask, ConfigChecksNameTheKey) {
  TaskOptions ok = csv_task("/d");
  EXPECT_NO_THROW(ok.validate());
  EXPECT_NO_THROW(TaskOptions{}.validate());  // no [task]: nothing to check
  auto err = [&](auto change) {
    TaskOptions c = csv_task("/d");
    change(c);
    return error_of([&] { c.validate(); });
  };
  EXPECT_EQ(err([](auto& c) { c.name = "SST-2"; }), "task.name: 'SST-2' is a GLUE task's name; choose another");
  EXPECT_EQ(err([](auto& c) { c.name = "a b"; }), "task.name: 'a b' may hold letters, digits, '.', '_' and '-' only");
  EXPECT_EQ(err([](auto& c) { c.labels = "pos"; }), "task.labels: a classification task needs at least 2 label values, got 'pos'");
  EXPECT_EQ(err([](auto& c) { c.metrics = "pearson"; }), "task.metrics: 'pearson' is not a classification metric (accuracy, f1, mcc)");
  EXPECT_EQ(err([](auto& c) { c.dev = "/d/dev.txt"; }),
            "task.dev: cannot tell the format of '/d/dev.txt' from its extension (.tsv, .csv, .jsonl); set task.format");
  EXPECT_EQ(err([](auto& c) { c.kind = TaskKind::kRegression; }),
            "task.labels: a regression task has no label values (got 'neg,pos')");
  EXPECT_EQ(err([](auto& c) { c.dev = ""; }),
            "task.dev: no dev file given (task sentiment; it picks the epoch and the learning rate)");
  // check_values(): what another subcommand checks of a [task] section. A named task without
  // its files and columns (the owner may take them on its command line) passes; bad values do
  // not, and validate() still demands the files.
  TaskOptions partial;
  partial.name = "reviews";
  partial.kind = TaskKind::kRegression;
  EXPECT_NO_THROW(partial.check_values());
  EXPECT_EQ(error_of([&] { partial.validate(); }), "task.train: no train file given (task reviews)");
  partial.labels = "a,b";
  EXPECT_EQ(error_of([&] { partial.check_values(); }), "task.labels: a regression task has no label values (got 'a,b')");
  partial = TaskOptions{};
  partial.name = "reviews";
  EXPECT_NO_THROW(partial.check_values());  // a classification task's labels may come later
  EXPECT_EQ(error_of([&] { partial.validate(); }), "task.train: no train file given (task reviews)");
  partial.dev = "/d/dev.txt";
  EXPECT_EQ(error_of([&] { partial.check_values(); }),
            "task.dev: cannot tell the format of '/d/dev.txt' from its extension (.tsv, .csv, .jsonl); set task.format");
  // format and kind are words of a fixed set, refused when the [task] section is read.
  TaskOptions read;
  EXPECT_EQ(error_of([&] {
              TaskOptions::fields().apply(read, {{"format", "xlsx"}}, "t.ini [task]");
            }),
            "t.ini [task]: key 'format': expected auto, tsv, csv or jsonl, got 'xlsx'");
  EXPECT_EQ(error_of([&] {
              TaskOptions::fields().apply(read, {{"kind", "ranking"}}, "t.ini [task]");
            }),
            "t.ini [task]: key 'kind': expected classification or regression, got 'ranking'");
  TaskOptions::fields().apply(read, {{"format", "jsonl"}, {"kind", "regression"}}, "t.ini [task]");
  EXPECT_EQ(read.format, TableFormat::kJsonl);
  EXPECT_EQ(read.kind, TaskKind::kRegression);
  EXPECT_EQ(TaskOptions::fields().to_kv(read).at("format"), "jsonl");
  EXPECT_EQ(TaskOptions::fields().to_kv(read).at("kind"), "regression");
  EXPECT_EQ(resolve_table_format(TableFormat::kAuto, "/d/x.JSON", "task.dev"), TableFormat::kJsonl);
  EXPECT_EQ(resolve_table_format(TableFormat::kCsv, "/d/x.tsv", "task.dev"), TableFormat::kCsv);
  EXPECT_EQ(error_of([] { read_table("/d/x.tsv", TableFormat::kAuto, true, {}); }),
            "/d/x.tsv: unknown table format 'auto' (tsv, csv, jsonl)");
  // The task list resolves the custom name; an unknown name still fails.
  const TaskSpec spec = custom_task_spec(ok);
  const auto tasks = parse_task_list("RTE, Sentiment", "finetune.tasks", &spec);
  ASSERT_EQ(tasks.size(), 2u);
  EXPECT_EQ(tasks[1], &spec);
  EXPECT_NE(error_of([] { parse_task_list("sentiment", "finetune.tasks"); }).find("unknown GLUE task 'sentiment'"),
            std::string::npos);
  EXPECT_NO_THROW(check_task_list_syntax("sentiment,RTE", "finetune.tasks"));
}

}  // namespace
}  // namespace tupe::finetune
