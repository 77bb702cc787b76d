// GLUE readers on the real files of $TUPE_SHARED_DATA/glue (published row counts, label
// sets and label counts counted independently with awk), on MNLI / QQP files written here in
// the real layout (those two are absent from the shared data), and on malformed rows.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "tests/finetune/glue_test_util.h"
#include "trainer/finetune/task_data.h"
#include "trainer/finetune/tasks/reader.h"
#include "trainer/finetune/tasks/tsv.h"

namespace tupe::finetune {
namespace {

using testing::error_of;
using testing::glue_dir;
using testing::ScratchDir;
using testing::write_text;

const SplitSpec& split_of(const TaskSpec& t, const std::string& name) {
  if (t.train.name == name) return t.train;
  for (const auto& s : t.dev)
    if (s.name == name) return s;
  for (const auto& s : t.test)
    if (s.name == name) return s;
  throw std::runtime_error("no split " + name + " in " + t.name);
}

SplitData read(const std::string& task, const std::string& split, const std::string& dir = glue_dir(),
               ReadOptions options = {}) {
  const TaskSpec& t = find_task(task, "test");
  return read_split(t, split_of(t, split), dir, options);
}

/// Label text -> count.
std::map<std::string, int64_t> label_counts(const std::string& task, const SplitData& s) {
  const TaskSpec& t = find_task(task, "test");
  std::map<std::string, int64_t> counts;
  for (const auto& ex : s.examples) counts[t.labels.at(static_cast<size_t>(ex.label))]++;
  return counts;
}

TEST(GlueReaders, PublishedRowCountsOfEveryRealFile) {
  const std::vector<std::tuple<std::string, std::string, size_t>> expected = {
      {"CoLA", "train", 8551}, {"CoLA", "dev", 1043},  {"CoLA", "test", 1063},
      {"SST-2", "train", 67349}, {"SST-2", "dev", 872}, {"SST-2", "test", 1821},
      {"MRPC", "train", 3667}, {"MRPC", "dev", 408},   {"MRPC", "test", 1725},
      {"STS-B", "train", 5749}, {"STS-B", "dev", 1500}, {"STS-B", "test", 1379},
      {"RTE", "train", 2490},  {"RTE", "dev", 277},    {"RTE", "test", 3000},
      {"WNLI", "train", 635},  {"WNLI", "dev", 71},    {"WNLI", "test", 146},
      {"QNLI", "dev", 5463},   {"QNLI", "test", 5463}, {"MNLI", "diagnostic", 1104}};
  for (const auto& [task, split, rows] : expected) {
    const SplitData s = read(task, split);
    EXPECT_EQ(s.examples.size(), rows) << task << " " << split;
    EXPECT_EQ(s.skipped_rows, 0) << task << " " << split;
    const bool test_file = split == "test" || split == "diagnostic";
    EXPECT_EQ(s.labelled, !test_file) << task << " " << split;
    for (const auto& ex : s.examples) {
      ASSERT_FALSE(ex.text_a.empty());
      if (test_file) {
        ASSERT_FALSE(ex.index.empty()) << task << " line " << ex.line;
      }
    }
  }
}

TEST(GlueReaders, LabelSetsAndCounts) {
  // Counts from awk over the label column (independent of the reader).
  using Counts = std::map<std::string, int64_t>;
  EXPECT_EQ(label_counts("CoLA", read("CoLA", "train")), (Counts{{"0", 2528}, {"1", 6023}}));
  EXPECT_EQ(label_counts("CoLA", read("CoLA", "dev")), (Counts{{"0", 322}, {"1", 721}}));
  EXPECT_EQ(label_counts("SST-2", read("SST-2", "train")), (Counts{{"0", 29780}, {"1", 37569}}));
  EXPECT_EQ(label_counts("SST-2", read("SST-2", "dev")), (Counts{{"0", 428}, {"1", 444}}));
  EXPECT_EQ(label_counts("MRPC", read("MRPC", "train")), (Counts{{"0", 1194}, {"1", 2473}}));
  EXPECT_EQ(label_counts("MRPC", read("MRPC", "dev")), (Counts{{"0", 129}, {"1", 279}}));
  EXPECT_EQ(label_counts("RTE", read("RTE", "train")), (Counts{{"entailment", 1249}, {"not_entailment", 1241}}));
  EXPECT_EQ(label_counts("RTE", read("RTE", "dev")), (Counts{{"entailment", 146}, {"not_entailment", 131}}));
  EXPECT_EQ(label_counts("WNLI", read("WNLI", "train")), (Counts{{"0", 323}, {"1", 312}}));
  EXPECT_EQ(label_counts("WNLI", read("WNLI", "dev")), (Counts{{"0", 40}, {"1", 31}}));
  EXPECT_EQ(label_counts("QNLI", read("QNLI", "dev")), (Counts{{"entailment", 2702}, {"not_entailment", 2761}}));
  // STS-B: float scores in [0, 5]; mean of dev 2.3639 (awk), maximum 5.
  const SplitData sts = read("STS-B", "dev");
  double sum = 0, lo = 5, hi = 0;
  for (const auto& ex : sts.examples) {
    sum += ex.score;
    lo = std::min(lo, ex.score);
    hi = std::max(hi, ex.score);
    EXPECT_EQ(ex.label, -1);
  }
  EXPECT_NEAR(sum / 1500.0, 2.3639, 5e-5);
  EXPECT_EQ(hi, 5.0);
  EXPECT_EQ(lo, 0.0);
}

TEST(GlueReaders, ColumnsByHeaderBomAndNoQuoteProcessing) {
  // MRPC starts with a BOM; its sentences hold bare " characters, kept verbatim.
  const SplitData mrpc = read("MRPC", "train");
  EXPECT_EQ(mrpc.examples[0].label, 1);
  EXPECT_EQ(mrpc.examples[0].text_a,
            "Amrozi accused his brother , whom he called \" the witness \" , of deliberately distorting his evidence .");
  EXPECT_EQ(mrpc.examples[0].text_b,
            "Referring to him as only \" the witness \" , Amrozi accused his brother of deliberately distorting his "
            "evidence .");
  EXPECT_EQ(mrpc.examples[0].line, 2);
  // CoLA (no header): the 4th column; first dev row.
  const SplitData cola = read("CoLA", "dev");
  EXPECT_EQ(cola.examples[0].text_a, "The sailors rode the breeze clear of the rocks.");
  EXPECT_EQ(cola.examples[0].line, 1);
  // Test files: the index column is kept for the submission.
  const SplitData sst_test = read("SST-2", "test");
  EXPECT_EQ(sst_test.examples[0].index, "0");
  EXPECT_EQ(sst_test.examples.back().index, "1820");
  // Columns are found by name: a file with the columns in another order reads the same.
  ScratchDir dir;
  write_text(dir.path() / "RTE/train.tsv",
             "\xEF\xBB\xBFlabel\tsentence2\tindex\tsentence1\r\nentailment\tB \"q\"\t0\tA\r\nnot_entailment\tD\t1\tC");
  const SplitData rte = read("RTE", "train", dir.str());
  ASSERT_EQ(rte.examples.size(), 2u);
  EXPECT_EQ(rte.examples[0].text_a, "A");
  EXPECT_EQ(rte.examples[0].text_b, "B \"q\"");
  EXPECT_EQ(rte.examples[1].label, 1);
  EXPECT_EQ(rte.examples[1].text_a, "C");  // last line without its line end
}

TEST(GlueReaders, MnliAndQqpInTheRealLayout) {
  ScratchDir dir;
  const std::string train_header =
      "index\tpromptID\tpairID\tgenre\tsentence1_binary_parse\tsentence2_binary_parse\tsentence1_parse\t"
      "sentence2_parse\tsentence1\tsentence2\tlabel1\tgold_label\n";
  write_text(dir.path() / "MNLI/train.tsv",
             train_header + "0\t31193\t31193n\tgovernment\t( x )\t( y )\t(ROOT x)\t(ROOT y)\tConceptually cream "
                            "skimming has two basic dimensions .\tProduct and geography are what make cream skimming "
                            "work.\tneutral\tneutral\n"
                            "1\t101457\t101457e\ttelephone\t( x )\t( y )\t(ROOT x)\t(ROOT y)\tyou know during the "
                            "season\tYou lose the things.\tentailment\tentailment\n");
  const std::string dev_header =
      "index\tpromptID\tpairID\tgenre\tsentence1_binary_parse\tsentence2_binary_parse\tsentence1_parse\t"
      "sentence2_parse\tsentence1\tsentence2\tlabel1\tlabel2\tlabel3\tlabel4\tlabel5\tgold_label\n";
  const std::string dev_row = "0\t63735\t63735n\tslate\t( x )\t( y )\t(ROOT x)\t(ROOT y)\tThe new rights are nice "
                              "enough\tEveryone really likes the newest benefits\tneutral\tentailment\tneutral\tneutral"
                              "\tneutral\tneutral\n";
  write_text(dir.path() / "MNLI/dev_matched.tsv", dev_header + dev_row + dev_row);
  write_text(dir.path() / "MNLI/dev_mismatched.tsv",
             dev_header + "0\t75290\t75290c\tletters\t( x )\t( y )\t(ROOT x)\t(ROOT y)\tYour contribution helped "
                          "\"make\" it possible\tYour contribution does not matter.\tcontradiction\tcontradiction\t"
                          "contradiction\tcontradiction\tcontradiction\tcontradiction\n");
  write_text(dir.path() / "MNLI/test_matched.tsv",
             "index\tpromptID\tpairID\tgenre\tsentence1_binary_parse\tsentence2_binary_parse\tsentence1_parse\t"
             "sentence2_parse\tsentence1\tsentence2\n0\t31493\t31493\ttravel\t( x )\t( y )\t(ROOT x)\t(ROOT y)\t"
             "Hierbas, ans seco, ans dulce\tHierbas is a name\n");
  const SplitData train = read("MNLI", "train", dir.str());
  ASSERT_EQ(train.examples.size(), 2u);
  EXPECT_EQ(train.examples[0].text_a, "Conceptually cream skimming has two basic dimensions .");
  EXPECT_EQ(train.examples[0].label, label_id(find_task("MNLI", "t"), "neutral"));
  EXPECT_EQ(train.examples[1].label, label_id(find_task("MNLI", "t"), "entailment"));
  EXPECT_EQ(read("MNLI", "dev_matched", dir.str()).examples.size(), 2u);
  const SplitData mm = read("MNLI", "dev_mismatched", dir.str());
  EXPECT_EQ(mm.examples[0].label, label_id(find_task("MNLI", "t"), "contradiction"));
  EXPECT_EQ(mm.examples[0].text_a, "Your contribution helped \"make\" it possible");
  const SplitData test = read("MNLI", "test_matched", dir.str());
  EXPECT_EQ(test.examples[0].index, "0");
  EXPECT_EQ(test.examples[0].text_b, "Hierbas is a name");
  EXPECT_EQ(find_task("mnli", "t").labels, (std::vector<std::string>{"entailment", "neutral", "contradiction"}));

  write_text(dir.path() / "QQP/train.tsv",
             "id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate\n133273\t213221\t213222\tHow is the life of a math "
             "student?\tWhich level of prepration is enough?\t0\n402555\t536040\t536041\tHow do I control my horny "
             "emotions?\tHow do you control your horniness?\t1\n");
  write_text(dir.path() / "QQP/test.tsv", "id\tquestion1\tquestion2\n0\tWhy am I lonely?\tWhy is Kashmir?\n");
  const SplitData qqp = read("QQP", "train", dir.str());
  ASSERT_EQ(qqp.examples.size(), 2u);
  EXPECT_EQ(qqp.examples[0].label, 0);
  EXPECT_EQ(qqp.examples[1].label, 1);
  EXPECT_EQ(qqp.examples[1].text_b, "How do you control your horniness?");
  const SplitData qqp_test = read("QQP", "test", dir.str());
  EXPECT_EQ(qqp_test.examples[0].index, "0");
  EXPECT_EQ(qqp_test.examples[0].text_a, "Why am I lonely?");
}

TEST(GlueReaders, BadRowsNameFileAndLineUnlessSkipped) {
  ScratchDir dir;
  const std::string header = "sentence\tlabel\n";
  write_text(dir.path() / "SST-2/train.tsv", header + "good film\t1\nthree\tcolumns\there\nbad film\t0\n");
  const std::string path = (dir.path() / "SST-2/train.tsv").string();
  EXPECT_EQ(error_of([&] { read("SST-2", "train", dir.str()); }),
            path + ":3: expected 2 columns (as the header), got 3 (--skip-bad-rows skips such rows)");
  const SplitData skipped = read("SST-2", "train", dir.str(), ReadOptions{true});
  EXPECT_EQ(skipped.examples.size(), 2u);
  EXPECT_EQ(skipped.skipped_rows, 1);
  ASSERT_EQ(skipped.skipped.size(), 1u);
  EXPECT_EQ(skipped.skipped[0], path + ":3: expected 2 columns (as the header), got 3");

  write_text(dir.path() / "SST-2/train.tsv", header + "good film\t1\nfine film\tpositive\n");
  EXPECT_EQ(error_of([&] { read("SST-2", "train", dir.str()); }),
            path + ":3: unknown label 'positive' (expected 0, 1) (--skip-bad-rows skips such rows)");
  write_text(dir.path() / "SST-2/train.tsv", header + " \t1\ngood film\t1\n");
  EXPECT_EQ(error_of([&] { read("SST-2", "train", dir.str()); }),
            path + ":2: empty text in column 'sentence' (--skip-bad-rows skips such rows)");
  write_text(dir.path() / "SST-2/train.tsv", header + "good film\t1\n\n");
  EXPECT_NE(error_of([&] { read("SST-2", "train", dir.str()); }).find(":3: expected 2 columns (as the header), got 1 (empty line)"),
            std::string::npos);

  // CoLA (no header): the fixed column count; STS-B: scores must be numbers in [0, 5].
  write_text(dir.path() / "CoLA/train.tsv", "gj04\t1\t\tFine.\ngj04\t1\tFine.\n");
  EXPECT_EQ(error_of([&] { read("CoLA", "train", dir.str()); }),
            (dir.path() / "CoLA/train.tsv").string() + ":2: expected 4 columns, got 3 (--skip-bad-rows skips such rows)");
  write_text(dir.path() / "STS-B/train.tsv",
             "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore\n"
             "0\tg\tf\ty\t0\tnone\tnone\tA.\tB.\t5.5\n");
  EXPECT_NE(error_of([&] { read("STS-B", "train", dir.str()); }).find("train.tsv:2: score '5.5' is not a number in [0, 5]"),
            std::string::npos);
  // One number syntax (docs/formats.md "Numbers"): Python's float() on the stripped field.
  // Spaces on either side are read alike, an underflow is 0, hex floats and nan are refused.
  const std::string stsb_header = "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore\n";
  write_text(dir.path() / "STS-B/train.tsv", stsb_header + "0\tg\tf\ty\t0\tn\tn\tA.\tB.\t 2.5\n"
                                                           "1\tg\tf\ty\t1\tn\tn\tA.\tB.\t2.5 \n"
                                                           "2\tg\tf\ty\t2\tn\tn\tA.\tB.\t1e-400\n"
                                                           "3\tg\tf\ty\t3\tn\tn\tA.\tB.\t0x1p2\n"
                                                           "4\tg\tf\ty\t4\tn\tn\tA.\tB.\tnan\n"
                                                           "5\tg\tf\ty\t5\tn\tn\tA.\tB.\t+4.\n");
  const SplitData scores = read("STS-B", "train", dir.str(), ReadOptions{true});
  ASSERT_EQ(scores.examples.size(), 4u);
  EXPECT_EQ(scores.examples[0].score, 2.5);
  EXPECT_EQ(scores.examples[1].score, 2.5);
  EXPECT_EQ(scores.examples[2].score, 0.0);
  EXPECT_EQ(scores.examples[3].score, 4.0);
  ASSERT_EQ(scores.skipped.size(), 2u);
  EXPECT_NE(scores.skipped[0].find(":5: score '0x1p2' is not a number in [0, 5]"), std::string::npos) << scores.skipped[0];
  EXPECT_NE(scores.skipped[1].find(":6: score 'nan' is not a number in [0, 5]"), std::string::npos) << scores.skipped[1];
  // A missing column and a missing file name the file.
  write_text(dir.path() / "RTE/dev.tsv", "index\tsentence1\tsentence2\n0\ta\tb\n");
  EXPECT_EQ(error_of([&] { read("RTE", "dev", dir.str()); }),
            (dir.path() / "RTE/dev.tsv").string() + ": header has no column 'label' (columns: index, sentence1, sentence2)");
  EXPECT_NE(error_of([&] { read("WNLI", "dev", dir.str()); }).find("WNLI/dev.tsv: no such file"), std::string::npos);
}

TEST(GlueReaders, TaskNamesAndLists) {
  EXPECT_EQ(find_task("sst2", "t").name, "SST-2");
  EXPECT_EQ(find_task("STS-B", "t").kind, TaskKind::kRegression);
  EXPECT_EQ(parse_task_list("all", "t").size(), 9u);
  const auto two = parse_task_list(" rte , cola", "t");
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two[0]->name, "RTE");
  EXPECT_NE(error_of([] { parse_task_list("SST-2,ax", "finetune.tasks"); }).find("finetune.tasks: unknown GLUE task 'ax'"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_task_list("rte,RTE", "finetune.tasks"); }).find("listed twice"), std::string::npos);
  // The paper's epochs: 5 for MNLI, QNLI, QQP; 10 for the others.
  for (const auto& t : all_tasks())
    EXPECT_EQ(t.paper_epochs, (t.name == "MNLI" || t.name == "QNLI" || t.name == "QQP") ? 5 : 10) << t.name;
  // Submission files of the benchmark.
  std::set<std::string> files;
  for (const auto& t : all_tasks())
    for (const auto& s : t.test) files.insert(s.submission);
  EXPECT_EQ(files, (std::set<std::string>{"AX.tsv", "CoLA.tsv", "MNLI-m.tsv", "MNLI-mm.tsv", "MRPC.tsv", "QNLI.tsv",
                                          "QQP.tsv", "RTE.tsv", "SST-2.tsv", "STS-B.tsv", "WNLI.tsv"}));
}

TEST(GlueReaders, MissingFilesAreListedBeforeTraining) {
  // The shared copy lacks MNLI and QQP, and QNLI's train split.
  const std::string err = error_of([] { check_task_files(parse_task_list("all", "t"), glue_dir(), true); });
  EXPECT_NE(err.find(glue_dir() + ": 9 GLUE file(s) missing: QQP/train.tsv, QQP/dev.tsv, QQP/test.tsv, "
                                  "MNLI/train.tsv, MNLI/dev_matched.tsv, MNLI/dev_mismatched.tsv, "
                                  "MNLI/test_matched.tsv, MNLI/test_mismatched.tsv, QNLI/train.tsv"),
            std::string::npos)
      << err;
  EXPECT_EQ(err.find("predict_test"), std::string::npos) << err;  // train files are missing: no hint
  EXPECT_NO_THROW(check_task_files(parse_task_list("CoLA,SST-2,MRPC,STS-B,RTE,WNLI", "t"), glue_dir(), true));
  // Only test files missing: the hint names the switch.
  ScratchDir dir;
  write_text(dir.path() / "RTE/train.tsv", "index\tsentence1\tsentence2\tlabel\n");
  write_text(dir.path() / "RTE/dev.tsv", "index\tsentence1\tsentence2\tlabel\n");
  EXPECT_EQ(error_of([&] { check_task_files(parse_task_list("RTE", "t"), dir.str(), true); }),
            dir.str() + ": 1 GLUE file(s) missing: RTE/test.tsv (finetune.predict_test = false skips the test files)");
  EXPECT_NO_THROW(check_task_files(parse_task_list("RTE", "t"), dir.str(), false));
}

}  // namespace
}  // namespace tupe::finetune
