// `tupe pretrain` on shards damaged as a disk or a careless script damages them: a zeroed
// 8 KB block, single bit flips, a rewrite in place with the modification time restored
// (before the run and while it reads), truncation (before and during), a locked shard; each
// ends the run with one error line naming the file and the cause, and nothing is trained on
// the bytes. Version 2 shards (no checksums) still train, flagged once; 64 shards train
// under `ulimit -n 256`.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <regex>
#include <thread>

#include "data_pipeline/counter_rng.h"
#include "data_pipeline/dataset.h"
#include "data_test_util.h"
#include "shard_damage.h"

namespace fs = std::filesystem;

namespace tupe::data_pipeline {
namespace {

/// WikiText-2 text (its first 60 KB: about 100 sequences of up to 128 tokens, one
/// preprocess.piece_bytes piece) preprocessed with configs/tiny.ini into 2 train shards, all
/// its sequences in shard 0: `tupe pretrain` reads every one in 7 steps.
struct Corpus {
  test::TempDir dir{"damaged"};
  std::string good = dir / "good";
  Corpus() {
    std::ifstream in(test::wikitext_test_path(), std::ios::binary);
    std::string text(60000, '\0');
    in.read(text.data(), static_cast<std::streamsize>(text.size()));
    text.resize(static_cast<size_t>(in.gcount()));
    text.resize(text.rfind('\n') + 1);
    test::write_file(dir / "small.txt", text);
    const auto r =
        test::run_command(test::tupe_bin() + " preprocess --quiet --config " + config() + " --input " +
                          (dir / "small.txt") + " --output " + good + " --tokenizer.vocab " + test::vocab_path());
    EXPECT_EQ(r.status, 0) << r.output;
  }
  static std::string config() { return ::tupe::testing::source_path("configs/tiny.ini"); }
  std::string shard(const std::string& folder, int s) const { return folder + "/" + shard_file_name("train", s, 2); }
  /// A copy of the good shards in folder `name`.
  std::string copy(const std::string& name) const {
    const std::string to = dir / name;
    fs::create_directories(to);
    for (int s = 0; s < 2; ++s) fs::copy_file(shard(good, s), shard(to, s), fs::copy_options::overwrite_existing);
    return to;
  }
  /// The `tupe pretrain` command line on `shards` for `steps` steps (a log line per step).
  std::string pretrain(const std::string& shards, int steps, const std::string& extra = "") const {
    return test::tupe_bin() + " pretrain --config " + config() + " --data.train_shards " + shards +
           " --data.validation_shards \"\" --train.max_steps " + std::to_string(steps) +
           " --resume none --checkpoint.dir " +
           (dir / ("ck-" + fs::path(shards).filename().string() + "-" + std::to_string(counter_++))) +
           " --train.log_every 1 " + extra;
  }
  mutable int counter_ = 0;
};

/// Exit status 1 and exactly one error line, holding every fragment; no step after it.
/// Returns that line ("" when there is none or several).
std::string expect_one_error(const test::CommandResult& r, std::initializer_list<std::string> fragments) {
  EXPECT_EQ(r.status, 1) << r.output;
  std::vector<std::string> errors;
  size_t begin = 0;
  while (begin < r.output.size()) {
    const size_t end = std::min(r.output.find('\n', begin), r.output.size());
    const std::string line = r.output.substr(begin, end - begin);
    if (line.find("error") != std::string::npos) errors.push_back(line);
    begin = end + 1;
  }
  EXPECT_EQ(errors.size(), 1u) << r.output;
  if (errors.size() != 1) return "";
  for (const auto& f : fragments)
    EXPECT_NE(errors[0].find(f), std::string::npos) << "'" << f << "' not in: " << errors[0];
  EXPECT_EQ(r.output.find("pre-training finished"), std::string::npos) << r.output;
  return errors[0];
}

/// Runs `command`, calling `at_step_1` once when its output shows the line of step 1; returns
/// the exit status and output (the run goes on meanwhile).
test::CommandResult run_and_act(const std::string& command, const std::function<void()>& at_step_1) {
  test::CommandResult r;
  FILE* p = ::popen((command + " 2>&1").c_str(), "r");
  if (!p) return r;
  char line[4096];
  bool acted = false;
  while (std::fgets(line, sizeof line, p)) {
    r.output += line;
    if (!acted && std::string(line).rfind("step 1/", 0) == 0) {
      acted = true;
      at_step_1();
    }
  }
  const int st = ::pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  EXPECT_TRUE(acted) << "no step 1 line: " << r.output;
  return r;
}

/// The sample of shard 0 of the set in `folder` holding token `token` (lengths read back).
int64_t sample_of_token(const std::string& folder, int64_t token) {
  DatasetOptions o;
  const auto ds = open_pretrain_dataset({folder}, o);
  int64_t at = 0;
  for (int64_t i = 0; i < ds->size(); ++i) {
    at += ds->length(i);
    if (token < at) return i;
  }
  return -1;
}

TEST(DataDamagedShards, AZeroedBlockStopsTheRunOnDemandAndInMemory) {
  Corpus c;
  const std::string dir = c.copy("zeroed");
  const std::string path = c.shard(dir, 0);
  const test::Layout tokens = test::layout_of(path, kTokenIdsDataset);
  ASSERT_GT(tokens.numel * tokens.element_bytes, 3 * 8192) << "shard 0 holds most of the text";
  // 8 KB of zeros in the middle of the token data ([PAD] ids inside the sequences).
  test::zero_bytes(path, tokens.offset_of(tokens.numel / 2 - 2048), 8192);
  for (const char* in_memory : {"false", "true"}) {
    SCOPED_TRACE(std::string("load_in_memory ") + in_memory);
    expect_one_error(test::run_command(c.pretrain(dir, 7, std::string("--data.load_in_memory ") + in_memory)),
                     {path + ": sample ", "checksum mismatch: the shard is damaged or was changed after preprocessing",
                      "run tupe preprocess again"});
  }
}

TEST(DataDamagedShards, SingleBitFlipsStopTheRunNamingTheSample) {
  Corpus c;
  const std::string dir = c.copy("flipped");
  const std::string path = c.shard(dir, 0);
  const test::Layout tokens = test::layout_of(path, kTokenIdsDataset);
  CounterRng rng(2024);
  for (int f = 0; f < 3; ++f) {
    const auto token = static_cast<int64_t>(rng.below(static_cast<uint64_t>(tokens.numel)));
    const int64_t offset = tokens.offset_of(token) + static_cast<int64_t>(rng.below(2));
    const int bit = static_cast<int>(rng.below(8));
    const int64_t sample = sample_of_token(dir, token);
    SCOPED_TRACE("token " + std::to_string(token) + " bit " + std::to_string(bit));
    test::flip_bit(path, offset, bit);
    expect_one_error(test::run_command(c.pretrain(dir, 7)),
                     {path + ": sample " + std::to_string(sample) + " ", "checksum mismatch"});
    test::flip_bit(path, offset, bit);
  }
  // Restored: it trains.
  const auto r = test::run_command(c.pretrain(dir, 2));
  EXPECT_EQ(r.status, 0) << r.output;
}

TEST(DataDamagedShards, ARewriteInPlaceWithTheModificationTimeRestoredIsRefused) {
  Corpus c;
  // Before the run: the rewritten samples fail their checksums when read.
  const std::string dir = c.copy("rewritten");
  const std::string path = c.shard(dir, 0);
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  test::rewrite_in_place(path, 1000, 3791, st);
  expect_one_error(test::run_command(c.pretrain(dir, 7)), {path + ": sample ", "checksum mismatch"});
  // While the run reads it: the next read sees the file changed (its change time moved).
  const std::string live = c.copy("rewritten-live");
  const std::string live_path = c.shard(live, 0);
  ASSERT_EQ(::stat(live_path.c_str(), &st), 0);
  const auto r = run_and_act(c.pretrain(live, 300), [&] { test::rewrite_in_place(live_path, 1000, 3791, st); });
  // Usually "changed since it was opened (modified in place with its modification time
  // restored, ...: its change time moved)"; plain "modified in place" when a read came between
  // the writes and the restored time; "checksum mismatch" when a read's bytes came after its
  // check of the file (DataChecksums.RewriteInPlace... checks the first deterministically).
  const std::string line = expect_one_error(r, {live_path});
  EXPECT_TRUE(line.find("changed since it was opened (modified in place") != std::string::npos ||
              line.find("checksum mismatch") != std::string::npos)
      << line;
}

TEST(DataDamagedShards, ATruncatedShardStopsTheRun) {
  Corpus c;
  const std::string dir = c.copy("truncated");
  const std::string path = c.shard(dir, 0);
  const test::Layout tokens = test::layout_of(path, kTokenIdsDataset);
  // Cut inside the token data: the chunk is no longer inside the file.
  fs::resize_file(path, static_cast<uintmax_t>(tokens.offset_of(tokens.numel / 2)));
  expect_one_error(test::run_command(c.pretrain(dir, 7)), {path, "truncated"});
  // While the run reads it.
  const std::string live = c.copy("truncated-live");
  const std::string live_path = c.shard(live, 0);
  const auto r = run_and_act(c.pretrain(live, 300), [&] { fs::resize_file(live_path, fs::file_size(live_path) / 2); });
  // "changed since it was opened (size ...)", or "truncated since it was opened" when the cut
  // came between a read's check of the file and its pread.
  expect_one_error(r, {live_path, "since it was opened"});
}

TEST(DataDamagedShards, Version2ShardsStillTrainFlaggedOnce) {
  Corpus c;
  const std::string dir = c.copy("version2");
  for (int s = 0; s < 2; ++s) test::make_version2(c.shard(dir, s));
  const auto r = test::run_command(c.pretrain(dir, 3));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("pre-training finished at step 3"), std::string::npos) << r.output;
  size_t flagged = 0;
  for (size_t pos = r.output.find("read unverified"); pos != std::string::npos;
       pos = r.output.find("read unverified", pos + 1))
    ++flagged;
  EXPECT_EQ(flagged, 1u) << r.output;
  EXPECT_NE(r.output.find("warning: train data: 2 of 2 shards (first " + c.shard(dir, 0) + ") are of format version 2"),
            std::string::npos)
      << r.output;
  // Verified shards say nothing of the kind.
  const auto good = test::run_command(c.pretrain(c.good, 2));
  ASSERT_EQ(good.status, 0) << good.output;
  EXPECT_EQ(good.output.find("unverified"), std::string::npos) << good.output;
}

TEST(DataDamagedShards, ALockedShardNamesTheLockAndTheVariable) {
  Corpus c;
  const std::string path = c.shard(c.good, 0);
  const int fd = ::open(path.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX), 0);  // what `flock -x` holds
  expect_one_error(test::run_command(c.pretrain(c.good, 2)),
                   {path, "locked by another process", "HDF5_USE_FILE_LOCKING=FALSE"});
  // The named way out: HDF5 without file locks reads it.
  const auto r = test::run_command("HDF5_USE_FILE_LOCKING=FALSE " + c.pretrain(c.good, 2));
  EXPECT_EQ(r.status, 0) << r.output;
  ::close(fd);
}

TEST(DataDamagedShards, SixtyFourShardsTrainUnderUlimit256) {
  Corpus c;
  const std::string many = c.dir / "many";
  const auto pp =
      test::run_command(test::tupe_bin() + " preprocess --quiet --config " + Corpus::config() + " --input " +
                        test::wikitext_test_path() + " --output " + many + " --tokenizer.vocab " + test::vocab_path() +
                        " --preprocess.num_shards 64 --preprocess.piece_bytes 16384");
  ASSERT_EQ(pp.status, 0) << pp.output;
  const auto r = test::run_command("bash -c 'ulimit -n 256 && exec " + c.pretrain(many, 2) + "'");
  EXPECT_EQ(r.status, 0) << r.output;
  // Too few even so: refused at start, counting what the process holds.
  const auto low = test::run_command("bash -c 'ulimit -n 100 && exec " + c.pretrain(many, 2) + "'");
  expect_one_error(low, {"data: 64 shard files need about", "but `ulimit -n` allows 100 (hard limit 100)"});
  std::smatch m;
  const std::regex need(R"(need about (\d+) open files \((\d+) open now, one per shard, (\d+) spare\))");
  ASSERT_TRUE(std::regex_search(low.output, m, need)) << low.output;
  const int total = std::stoi(m[1]), open_now = std::stoi(m[2]), spare = std::stoi(m[3]);
  EXPECT_EQ(total, open_now + 64 + spare);
  EXPECT_GT(open_now, 2);   // at least the standard streams and the log
  EXPECT_LT(open_now, 64);  // a single process holds a few dozen at most
}

}  // namespace
}  // namespace tupe::data_pipeline
