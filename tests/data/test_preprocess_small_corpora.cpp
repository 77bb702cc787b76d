// `tupe preprocess` on small and degenerate corpora: the default piece size
// deals a 1.3 MB file evenly over its shards, the progress line counts the input once, and an
// input of blank lines or of one document fails in one line and leaves no folder behind.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <regex>

#include "data_pipeline/dataset.h"
#include "data_test_util.h"

namespace tupe::data_pipeline {
namespace {

namespace fs = std::filesystem;

test::CommandResult preprocess(const std::string& args) {
  return test::run_command(test::tupe_bin() + " preprocess " + args + " --tokenizer.vocab " + test::vocab_path());
}

/// Occurrences of "error:" in the output (an error is one line).
size_t error_lines(const std::string& out) {
  size_t n = 0;
  for (size_t pos = out.find("error:"); pos != std::string::npos; pos = out.find("error:", pos + 1)) ++n;
  return n;
}

/// Sequences per train shard of the set in `folder` (describe_shards' "<N> sequences").
std::vector<int64_t> sequences_per_shard(const std::string& folder) {
  DatasetOptions o;
  o.warn_unverified = false;
  const auto ds = open_pretrain_dataset({folder}, o);
  std::vector<int64_t> counts;
  const std::regex n_re("([0-9]+) sequences");
  for (const auto& [key, value] : describe_shards(ds->info(), "train")) {
    std::smatch m;
    if (key.find("shard") != std::string::npos && std::regex_search(value, m, n_re)) counts.push_back(std::stoll(m[1]));
  }
  return counts;
}

TEST(DataCliPreprocess, DefaultPieceSizeDealsASmallCorpusEvenlyOverItsShards) {
  // WikiText-2's test split (1.29 MB): in 1 MiB pieces its two shards held 4,651 : 309-like
  // shares (one piece of 1 MiB, one of 0.23 MiB); auto pieces are 64 KiB here (20 of them).
  test::TempDir dir("small-corpus");
  const test::CommandResult r = preprocess("--input " + test::wikitext_test_path() + " --output " + (dir / "out") +
                                           " --preprocess.documents line --preprocess.num_shards 2"
                                           " --preprocess.validation_ratio 0.05");
  ASSERT_EQ(r.status, 0) << r.output;
  const std::vector<int64_t> n = sequences_per_shard(dir / "out");
  ASSERT_EQ(n.size(), 2u);
  const int64_t a = n[0], b = n[1];
  EXPECT_GT(a, 500);
  EXPECT_LE(std::max(a, b), std::min(a, b) * 11 / 10) << "shards of " << a << " and " << b << " sequences";
  // The progress line's total is the file's size (each piece counted once, though it feeds a
  // train and a validation shard): 1290547 bytes = 1.2 MiB.
  const double mib = static_cast<double>(fs::file_size(test::wikitext_test_path())) / (1 << 20);
  char want[64];
  std::snprintf(want, sizeof want, "%.1f MiB of %.1f MiB", mib, mib);
  EXPECT_NE(r.output.find(want), std::string::npos) << "'" << want << "' not in: " << r.output;
}

TEST(DataCliPreprocess, BlankOrOneDocumentInputsFailInOneLineAndLeaveNoFolder) {
  test::TempDir dir("degenerate");
  test::write_file(dir / "blank.txt", "\n\n   \n\t\n");
  test::CommandResult r = preprocess("--input " + (dir / "blank.txt") + " --output " + (dir / "out-blank"));
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("blank.txt: no text"), std::string::npos) << r.output;
  EXPECT_EQ(error_lines(r.output), 1u) << r.output;
  EXPECT_FALSE(fs::exists(dir / "out-blank")) << "a failed run leaves no (empty) folder";
  // One document: a 5% validation share draws none of it, and pre-training would refuse the
  // empty validation split; refused here, before any shard is written.
  test::write_file(dir / "one.txt", "A single paragraph of text about the Tower of London , which is old .\n");
  r = preprocess("--input " + (dir / "one.txt") + " --output " + (dir / "out-one") +
                 " --preprocess.validation_ratio 0.05 --preprocess.documents line");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("one.txt: preprocess.validation_ratio = 0.05 sent no document to validation"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(error_lines(r.output), 1u) << r.output;
  EXPECT_FALSE(fs::exists(dir / "out-one"));
  EXPECT_EQ(r.output.find("--preprocess.documents line makes every line one"), std::string::npos) << r.output;
  // Lines without a blank line between them (the shared WikiText-2 raw files) are one document
  // under the default documents = blank_line: the line says how to make each line one.
  test::write_file(dir / "lines.txt", "The first line of text .\nThe second line of text .\nThe third line .\n");
  r = preprocess("--input " + (dir / "lines.txt") + " --output " + (dir / "out-lines") +
                 " --preprocess.validation_ratio 0.05");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("(with preprocess.documents = blank_line, text without blank lines is one document; "
                          "--preprocess.documents line makes every line one)"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(error_lines(r.output), 1u) << r.output;
  // An existing folder is kept (only what the run created is removed).
  fs::create_directories(dir / "mine");
  r = preprocess("--input " + (dir / "one.txt") + " --output " + (dir / "mine") + " --preprocess.validation_ratio 0.05");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_TRUE(fs::is_directory(dir / "mine"));
  // With validation_ratio 0 the same document is a train shard.
  r = preprocess("--input " + (dir / "one.txt") + " --output " + (dir / "out-train") +
                 " --preprocess.validation_ratio 0");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(sequences_per_shard(dir / "out-train"), std::vector<int64_t>{1});
}

}  // namespace
}  // namespace tupe::data_pipeline
