// Checks the outputs of the end-to-end jobs that CTest ran before this test
// (tests/finetune/CMakeLists.txt): `mpirun -np 2 tupe finetune` on SST-2 and RTE subsets from a
// tiny TUPE-R pre-trained by `tupe pretrain` on WikiText-2, `tupe evaluate` of the saved SST-2
// model, an SST-2 job without dropout on 1 and on 2 ranks, a bf16 job, and a WNLI job with
// malformed rows and --skip-bad-rows.
// $TUPE_GLUE_E2E_DIR is the jobs' folder.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <set>

#include "tests/finetune/glue_test_util.h"
#include "trainer/finetune/tasks/tsv.h"

namespace tupe::finetune {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

fs::path e2e_dir() {
  const char* d = std::getenv("TUPE_GLUE_E2E_DIR");
  if (!d || !*d) throw std::runtime_error("TUPE_GLUE_E2E_DIR is not set (run through CTest)");
  return d;
}

json load_json(const fs::path& path) { return json::parse(testing::read_text(path)); }

const json& task_of(const json& results, const std::string& name) {
  for (const auto& t : results["tasks"])
    if (t["task"] == name) return t;
  throw std::runtime_error("no task " + name + " in results.json");
}

/// Rows of a TSV file split on tabs by hand (independent of the readers): header, rows.
std::vector<std::vector<std::string>> tsv_rows(const fs::path& path) {
  std::vector<std::vector<std::string>> rows;
  std::string text = testing::read_text(path);
  if (text.rfind("\xEF\xBB\xBF", 0) == 0) text = text.substr(3);
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    rows.push_back(split_tabs(text.substr(start, end - start)));
    start = end + 1;
  }
  return rows;
}

TEST(GlueEndToEnd, Sst2BeatsTheMajorityClassOnDev) {
  const json results = load_json(e2e_dir() / "np2/results.json");
  EXPECT_EQ(results["world_size"], 2);
  const json& sst = task_of(results, "SST-2");
  // Majority baseline from the dev file itself: the larger label share.
  const auto dev = tsv_rows(fs::path(testing::glue_dir()) / "SST-2/dev.tsv");
  int64_t ones = 0, total = 0;
  for (size_t i = 1; i < dev.size(); ++i, ++total) ones += dev[i].at(1) == "1" ? 1 : 0;
  const double majority = static_cast<double>(std::max(ones, total - ones)) / static_cast<double>(total);
  EXPECT_NEAR(majority, 444.0 / 872.0, 1e-12);
  const double accuracy = sst["reported"]["dev"]["accuracy"].get<double>();
  std::printf("SST-2 dev accuracy %.4f vs majority %.4f\n", accuracy, majority);
  EXPECT_GT(accuracy, majority + 0.02);
  // Every epoch of every run is recorded, the loss went down.
  ASSERT_EQ(sst["runs"].size(), 1u);
  const json& run = sst["runs"][0];
  ASSERT_EQ(run["epochs"].size(), 2u);
  EXPECT_LT(run["epochs"][1]["train_loss"].get<double>(), run["epochs"][0]["train_loss"].get<double>());
  EXPECT_EQ(run["epochs"][1]["step"].get<int64_t>(), 2 * run["steps_per_epoch"].get<int64_t>());
  EXPECT_EQ(run["steps_per_epoch"].get<int64_t>(), (2000 + 31) / 32);
  EXPECT_EQ(sst["train_rows"], 2000);
  EXPECT_EQ(sst["train_rows_in_file"], 67349);
  // RTE ran too, with its own metrics.
  const json& rte = task_of(results, "RTE");
  EXPECT_TRUE(rte["reported"]["dev"].contains("accuracy"));
  EXPECT_EQ(rte["train_rows"], 2000);
}

TEST(GlueEndToEnd, SubmissionFilesHaveNamesHeadersRowsAndLabels) {
  const fs::path sub = e2e_dir() / "np2/submission";
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(sub)) names.insert(e.path().filename().string());
  EXPECT_EQ(names, (std::set<std::string>{"RTE.tsv", "SST-2.tsv"}));
  const std::vector<std::tuple<std::string, std::string, std::set<std::string>>> files = {
      {"SST-2.tsv", "SST-2/test.tsv", {"0", "1"}}, {"RTE.tsv", "RTE/test.tsv", {"entailment", "not_entailment"}}};
  for (const auto& [file, test_file, labels] : files) {
    const auto rows = tsv_rows(sub / file);
    const auto test = tsv_rows(fs::path(testing::glue_dir()) / test_file);
    ASSERT_GE(rows.size(), 2u);
    EXPECT_EQ(rows[0], (std::vector<std::string>{"index", "prediction"})) << file;
    ASSERT_EQ(rows.size(), test.size()) << file;  // one line per test example, plus the header
    for (size_t i = 1; i < rows.size(); ++i) {
      ASSERT_EQ(rows[i].size(), 2u) << file << " line " << i + 1;
      EXPECT_EQ(rows[i][0], test[i][0]) << file << " line " << i + 1;  // the test file's index, in order
      EXPECT_TRUE(labels.count(rows[i][1])) << file << ": label '" << rows[i][1] << "'";
    }
  }
}

TEST(GlueEndToEnd, MarkdownTableAndSavedModel) {
  const std::string md = testing::read_text(e2e_dir() / "np2/results.md");
  EXPECT_NE(md.find("| model | steps | MNLI-m/mm | QNLI | QQP | SST | CoLA | MRPC | RTE | STS | avg |"), std::string::npos);
  EXPECT_NE(md.find("| TUPE-R | 40 | - | - | - | "), std::string::npos) << md;
  EXPECT_NE(md.find("- (2 of 9)"), std::string::npos) << md;
  EXPECT_TRUE(fs::is_directory(e2e_dir() / "np2/models/SST-2"));
  EXPECT_TRUE(fs::is_directory(e2e_dir() / "np2/models/RTE"));
}

TEST(GlueEndToEnd, EvaluateReproducesTheReportedRun) {
  const json results = load_json(e2e_dir() / "np2/results.json");
  const json& sst = task_of(results, "SST-2");
  const json eval = load_json(e2e_dir() / "evaluate/evaluation_SST-2.json");
  EXPECT_EQ(eval["task"], "SST-2");
  // The saved model is the submission run at its selected epoch; 1 rank vs 2 changes only
  // the float summation order: at most one flipped example.
  EXPECT_NEAR(eval["dev"]["dev"]["accuracy"].get<double>(), sst["runs"][0]["dev"]["dev"]["accuracy"].get<double>(),
              1.01 / 872.0);
  const auto a = tsv_rows(e2e_dir() / "evaluate/submission/SST-2.tsv");
  const auto b = tsv_rows(e2e_dir() / "np2/submission/SST-2.tsv");
  ASSERT_EQ(a.size(), b.size());
  int64_t differ = 0;
  for (size_t i = 0; i < a.size(); ++i) differ += a[i] != b[i] ? 1 : 0;
  EXPECT_LE(differ, 2);
}

TEST(GlueEndToEnd, ResultsDoNotDependOnWorldSize) {
  // Dropout off: 1 rank (7 micro-batches per step) and 2 ranks take the same steps (the step
  // divides the summed gradient by the global batch's examples).
  const json one = load_json(e2e_dir() / "ws1/results.json");
  const json two = load_json(e2e_dir() / "ws2/results.json");
  EXPECT_EQ(one["world_size"], 1);
  EXPECT_EQ(two["world_size"], 2);
  const json& r1 = task_of(one, "SST-2")["runs"][0];
  const json& r2 = task_of(two, "SST-2")["runs"][0];
  ASSERT_EQ(r1["epochs"].size(), 2u);
  ASSERT_EQ(r2["epochs"].size(), 2u);
  EXPECT_EQ(r1["steps_per_epoch"], 21);  // 621 rows / batch 31: 20 full batches and one of 1 example
  for (size_t e = 0; e < r1["epochs"].size(); ++e) {
    const double l1 = r1["epochs"][e]["train_loss"].get<double>(), l2 = r2["epochs"][e]["train_loss"].get<double>();
    EXPECT_NEAR(l1, l2, 1e-5 * std::abs(l1)) << "epoch " << e + 1;
    EXPECT_NEAR(r1["epochs"][e]["dev"]["dev"]["accuracy"].get<double>(),
                r2["epochs"][e]["dev"]["dev"]["accuracy"].get<double>(), 2.01 / 872.0);
  }
}

TEST(GlueEndToEnd, LambWithAPolynomialScheduleFineTunes) {
  // [optimizer] optimizer = lamb, schedule = polynomial, power = 2 on 2 ranks: the step ran
  // LAMB, every epoch's last LR is the schedule's closed form at the protocol's warm-up and
  // length, and the run learns (finite, falling training loss; no skipped step).
  const json results = load_json(e2e_dir() / "lamb/results.json");
  EXPECT_EQ(results["world_size"], 2);
  EXPECT_EQ(results["config"]["optimizer.optimizer"], "lamb");
  const json& run = task_of(results, "SST-2")["runs"][0];
  EXPECT_EQ(run["optimizer"], "lamb");
  const int64_t per_epoch = run["steps_per_epoch"], total = run["total_steps"], warmup = run["warmup_steps"];
  EXPECT_EQ(per_epoch, 21);
  EXPECT_EQ(total, 42);
  EXPECT_EQ(warmup, std::llround(0.06 * 42));  // finetune.warmup_ratio of the run's steps
  const double peak = run["lr"];
  EXPECT_EQ(peak, 1e-2);
  ASSERT_EQ(run["epochs"].size(), 2u);
  for (const json& e : run["epochs"]) {
    const int64_t t = e["step"];
    const double progress = static_cast<double>(t - warmup) / static_cast<double>(total - warmup);
    const double want = peak * (1.0 - progress) * (1.0 - progress);
    EXPECT_NEAR(e["learning_rate"].get<double>(), want, 1e-15) << "step " << t;
  }
  const double l1 = run["epochs"][0]["train_loss"], l2 = run["epochs"][1]["train_loss"];
  EXPECT_TRUE(std::isfinite(l1) && std::isfinite(l2)) << l1 << " " << l2;
  EXPECT_LT(l2, l1);
  EXPECT_EQ(run["skipped_steps"], 0);
}

TEST(GlueEndToEnd, Bf16JobRuns) {
  const json results = load_json(e2e_dir() / "bf16/results.json");
  EXPECT_EQ(results["precision"], "bf16");
  const json& run = task_of(results, "RTE")["runs"][0];
  const double loss = run["epochs"][0]["train_loss"].get<double>();
  EXPECT_TRUE(std::isfinite(loss) && loss > 0.3 && loss < 1.5) << loss;  // near ln 2 for two balanced classes
  EXPECT_EQ(run["skipped_steps"], 0);
}

TEST(GlueEndToEnd, SkippedBadRowsAreCounted) {
  const json results = load_json(e2e_dir() / "skip/results.json");
  const json& wnli = task_of(results, "WNLI");
  EXPECT_EQ(wnli["skipped_rows"]["train"], 2);
  EXPECT_EQ(wnli["skipped_rows"]["dev"], 0);
  EXPECT_EQ(wnli["train_rows_in_file"], 38);
  ASSERT_EQ(wnli["skipped_examples"].size(), 2u);
  EXPECT_NE(wnli["skipped_examples"][0].get<std::string>().find("WNLI/train.tsv:4: unknown label 'maybe'"),
            std::string::npos);
  EXPECT_NE(wnli["skipped_examples"][1].get<std::string>().find("WNLI/train.tsv:9: expected 4 columns"),
            std::string::npos);
}

}  // namespace
}  // namespace tupe::finetune
