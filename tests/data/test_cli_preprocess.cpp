// `tupe preprocess` as a user runs it (one process): bad inputs give one error line naming
// the file and the cause and a non-zero exit; a good run leaves shards and nothing else.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "data_pipeline/dataset.h"
#include "data_test_util.h"

namespace tupe::data_pipeline {
namespace {

test::CommandResult preprocess(const std::string& args) {
  return test::run_command(test::tupe_bin() + " preprocess --quiet " + args);
}

/// Exit status 1 and exactly one error line holding every fragment.
void expect_cli_error(const test::CommandResult& r, std::initializer_list<std::string> fragments) {
  EXPECT_EQ(r.status, 1) << r.output;
  size_t lines = 0, pos = 0;
  std::string error_line;
  while ((pos = r.output.find("error:", pos)) != std::string::npos) {
    ++lines;
    const size_t begin = r.output.rfind('\n', pos);
    const size_t end = r.output.find('\n', pos);
    error_line = r.output.substr(begin == std::string::npos ? 0 : begin + 1, end - (begin == std::string::npos ? 0 : begin + 1));
    ++pos;
  }
  EXPECT_EQ(lines, 1u) << r.output;
  for (const auto& f : fragments) EXPECT_NE(error_line.find(f), std::string::npos) << "'" << f << "' not in: " << error_line;
}

TEST(DataCliPreprocess, BadInputsGiveOneLineAndNonZeroExit) {
  test::TempDir dir("cli-bad");
  const std::string vocab = " --tokenizer.vocab " + test::vocab_path();
  test::write_file(dir / "bad.txt", "first line\nsecond \xFF\xFE line\n");
  expect_cli_error(preprocess("--input " + (dir / "bad.txt") + " --output " + (dir / "out") + vocab),
                   {dir / "bad.txt", "invalid UTF-8 at byte 18"});
  test::write_file(dir / "empty.txt", "");
  expect_cli_error(preprocess("--input " + (dir / "empty.txt") + " --output " + (dir / "out") + vocab),
                   {dir / "empty.txt", "empty file"});
  test::write_file(dir / "good.txt", "some text here\n\nand another document\n");
  expect_cli_error(preprocess("--input " + (dir / "good.txt") + " --output " + (dir / "out") +
                              " --tokenizer.vocab " + (dir / "missing-vocab.txt")),
                   {dir / "missing-vocab.txt"});
  test::write_file(dir / "bad-vocab.txt", "[PAD]\n[UNK]\nhello\n");  // no [CLS], [SEP], [MASK]
  expect_cli_error(preprocess("--input " + (dir / "good.txt") + " --output " + (dir / "out") +
                              " --tokenizer.vocab " + (dir / "bad-vocab.txt")),
                   {dir / "bad-vocab.txt"});
  expect_cli_error(preprocess("--input " + (dir / "nothing-here.txt") + " --output " + (dir / "out") + vocab),
                   {dir / "nothing-here.txt", "no such file"});
  expect_cli_error(preprocess("--input " + (dir / "good.txt") + " --output " + (dir / "out") + vocab +
                              " --preprocess.max_seq_len 4"),
                   {"preprocess.max_seq_len"});
  EXPECT_FALSE(std::filesystem::exists(dir / "out/train-00000-of-00001.h5")) << "no shard from a failed run";
}

TEST(DataCliPreprocess, GoodRunWritesShardsOnlyAndRefusesToOverwrite) {
  test::TempDir dir("cli-good");
  const std::string args = "--input " + test::shared_data() + "/text/bert-sample-text.txt --output " + (dir / "out") +
                           " --tokenizer.vocab " + test::vocab_path() +
                           " --preprocess.max_seq_len 64 --preprocess.validation_ratio 0.3 --preprocess.documents line";
  const auto r = preprocess(args + " --preprocess.num_shards 2");
  ASSERT_EQ(r.status, 0) << r.output;
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir / "out")) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"effective_config.ini", "train-00000-of-00002.h5",
                                             "train-00001-of-00002.h5", "validation-00000-of-00001.h5"}));
  auto config_text = [&] {
    std::ifstream in(dir / "out/effective_config.ini");
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  EXPECT_NE(config_text().find("num_shards = 2"), std::string::npos) << config_text();
  EXPECT_NE(r.output.find("# effective config: " + (dir / "out/effective_config.ini")), std::string::npos) << r.output;
  DatasetOptions o;
  const auto train = open_pretrain_dataset({dir / "out"}, o);
  o.split = "validation";
  const auto valid = open_pretrain_dataset({dir / "out"}, o);
  EXPECT_GT(train->size(), 0);
  EXPECT_GT(valid->size(), 0);
  EXPECT_EQ(train->info().max_seq_len, 64);
  expect_cli_error(preprocess(args + " --preprocess.num_shards 2"), {dir / "out", "--overwrite"});
  EXPECT_EQ(preprocess(args + " --overwrite --preprocess.num_shards 1").status, 0);
  names.clear();
  for (const auto& e : std::filesystem::directory_iterator(dir / "out")) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names,
            (std::vector<std::string>{"effective_config.ini", "train-00000-of-00001.h5", "validation-00000-of-00001.h5"}))
      << "stale shards of the earlier layout are removed";
  EXPECT_NE(config_text().find("num_shards = 1"), std::string::npos) << config_text();
}


// A separate validation file (preprocess.split = validation): every document goes to
// validation shards and no train shard is written. Pieces are packed as the same streams
// whatever the split, so the validation sequences must equal, token for token, the train
// sequences of a run with validation_ratio 0 on the same file and shard count.
TEST(DataCliPreprocess, SplitValidationWritesTheWholeFileAsValidation) {
  test::TempDir dir("cli-split");
  const std::string common = "--input " + test::shared_data() + "/text/wikitext-2/wiki.test.raw --tokenizer.vocab " +
                             test::vocab_path() + " --preprocess.documents line --preprocess.piece_bytes 65536";
  const auto v = preprocess(common + " --output " + (dir / "valid") +
                            " --preprocess.split validation --preprocess.num_validation_shards 2");
  ASSERT_EQ(v.status, 0) << v.output;
  EXPECT_NE(v.output.find("validation sequences"), std::string::npos) << v.output;
  EXPECT_EQ(v.output.find("train sequences"), std::string::npos) << v.output;
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir / "valid")) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"effective_config.ini", "validation-00000-of-00002.h5",
                                             "validation-00001-of-00002.h5"}));
  const auto t = preprocess(common + " --output " + (dir / "train") +
                            " --preprocess.validation_ratio 0 --preprocess.num_shards 2");
  ASSERT_EQ(t.status, 0) << t.output;
  DatasetOptions o;
  const auto train = open_pretrain_dataset({dir / "train"}, o);
  o.split = "validation";
  const auto valid = open_pretrain_dataset({dir / "valid"}, o);
  ASSERT_GT(train->size(), 100);
  ASSERT_EQ(valid->size(), train->size());
  Sample a, b;
  for (int64_t i = 0; i < train->size(); ++i) {
    train->get(i, a);
    valid->get(i, b);
    ASSERT_EQ(a.token_ids, b.token_ids) << "sequence " << i;
  }
  // The folder holds no train shards, so it cannot be taken as training data by mistake.
  DatasetOptions as_train;
  try {
    open_pretrain_dataset({dir / "valid"}, as_train);
    ADD_FAILURE() << "a validation-only folder was opened as train data";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("no train shards"), std::string::npos) << e.what();
  }
  // A validation file without text is refused like an empty train file.
  test::write_file(dir / "blank.txt", "\n\n   \n");
  expect_cli_error(preprocess("--input " + (dir / "blank.txt") + " --output " + (dir / "blank") +
                              " --tokenizer.vocab " + test::vocab_path() + " --preprocess.split validation"),
                   {dir / "blank.txt"});
  EXPECT_FALSE(std::filesystem::exists(dir / "blank/validation-00000-of-00001.h5"));
}

}  // namespace
}  // namespace tupe::data_pipeline
