// The preprocess commit protocol (data_pipeline/preprocess_commit.h) with the ranks of one
// run as threads of this process (ThreadAgreement): a good run writes the shards a 1-rank run
// writes, byte for byte; a rank failing in each phase -- planning, writing, committing --
// makes every rank throw the same one-line message and leaves no shard and no temporary file.
#include <gtest/gtest.h>

#include <algorithm>
#include <barrier>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <thread>

#include "common/error.h"
#include "data_pipeline/preprocess_commit.h"
#include "data_test_util.h"

namespace fs = std::filesystem;

namespace tupe::data_pipeline {
namespace {

/// What the threads of one simulated run share: one exchange slot per rank and a barrier.
class ThreadGroup {
 public:
  explicit ThreadGroup(int world) : world_(world), barrier_(world), slots_(static_cast<size_t>(world)) {}
  int world() const { return world_; }
  /// Every rank's `value`, on every rank (collective).
  std::vector<std::string> all_gather(int rank, const std::string& value) {
    slots_[static_cast<size_t>(rank)] = value;
    barrier_.arrive_and_wait();
    std::vector<std::string> out = slots_;
    barrier_.arrive_and_wait();  // nobody writes the next value before all have read this one
    return out;
  }
  void barrier() { barrier_.arrive_and_wait(); }

 private:
  const int world_;
  std::barrier<> barrier_;
  std::vector<std::string> slots_;
};

/// RankAgreement over a ThreadGroup, with dist/small_collectives.h's semantics.
class ThreadAgreement final : public RankAgreement {
 public:
  ThreadAgreement(ThreadGroup& group, int rank) : group_(group), rank_(rank) {}
  int rank() const override { return rank_; }
  int world_size() const override { return group_.world(); }
  std::string first_error(const std::string& my_error) override {
    for (const auto& e : group_.all_gather(rank_, my_error))
      if (!e.empty()) return e;
    return "";
  }
  std::string first_difference(const std::string& what,
                               const std::vector<std::pair<std::string, std::string>>& entries) override {
    std::string mine;
    for (const auto& [k, v] : entries) mine += k + '\x1f' + v + '\x1e';
    const auto all = group_.all_gather(rank_, mine);
    for (size_t r = 1; r < all.size(); ++r)
      if (all[r] != all[0]) return what + ": rank " + std::to_string(r) + " differs from rank 0";
    return "";
  }
  std::vector<int64_t> sum(const std::vector<int64_t>& values) override {
    std::string mine;
    for (int64_t v : values) mine += std::to_string(v) + ",";
    std::vector<int64_t> out(values.size(), 0);
    for (const auto& text : group_.all_gather(rank_, mine)) {
      std::istringstream in(text);
      std::string item;
      for (size_t i = 0; std::getline(in, item, ','); ++i) out.at(i) += std::stoll(item);
    }
    return out;
  }
  std::string broadcast(const std::string& text, int root) override {
    return group_.all_gather(rank_, text).at(static_cast<size_t>(root));
  }
  void barrier() override { group_.barrier(); }
  void begin_work() override { ++work_begun; }
  int work_begun = 0;  ///< begin_work() calls (once per run)

 private:
  ThreadGroup& group_;
  const int rank_;
};

/// One rank's outcome: the summary, or the message it threw (and whether it was agreed).
struct Outcome {
  PreprocessSummary summary;
  std::string error;
  bool agreed = false;
  int work_begun = 0;  ///< RankAgreement::begin_work() calls of a run that succeeded
};

/// Runs `world` ranks as threads; `setup(rank, request, config)` may change a rank's inputs.
std::vector<Outcome> run_ranks(int world, PreprocessRequest request, PreprocessOptions config,
                               const std::function<void(int, PreprocessRequest&, PreprocessOptions&)>& setup = {}) {
  ThreadGroup group(world);
  std::vector<Outcome> out(static_cast<size_t>(world));
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r)
    threads.emplace_back([&, r] {
      PreprocessRequest req = request;
      PreprocessOptions cfg = config;
      if (setup) setup(r, req, cfg);
      TokenizerOptions tok;
      tok.vocab = test::vocab_path();
      ThreadAgreement ranks(group, r);
      Outcome& o = out[static_cast<size_t>(r)];
      try {
        o.summary = run_preprocess(req, cfg, tok, ranks);
        o.work_begun = ranks.work_begun;
      } catch (const AgreedError& e) {
        o.error = e.what();
        o.agreed = true;
      } catch (const std::exception& e) {
        o.error = e.what();
      }
    });
  for (auto& t : threads) t.join();
  return out;
}

/// The names in `dir` (empty when it does not exist), sorted.
std::vector<std::string> names_in(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

std::string bytes_of(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

/// Every rank failed with the same agreed one-line message holding `fragment`, and `dir`
/// holds no shard and no temporary file.
void expect_failed_cleanly(const std::vector<Outcome>& out, const std::string& fragment, const std::string& dir) {
  for (size_t r = 0; r < out.size(); ++r) {
    EXPECT_TRUE(out[r].agreed) << "rank " << r << ": " << out[r].error;
    EXPECT_EQ(out[r].error, out[0].error) << "rank " << r;
    EXPECT_EQ(out[r].error.find('\n'), std::string::npos) << out[r].error;
  }
  EXPECT_NE(out[0].error.find(fragment), std::string::npos) << out[0].error;
  for (const auto& name : names_in(dir)) {
    EXPECT_EQ(name.find(".h5"), std::string::npos) << "left behind: " << name;
    EXPECT_EQ(name.find(".tmp-"), std::string::npos) << "left behind: " << name;
  }
}

/// A text of `lines` lines of real words (documents = line), about 60 bytes each.
std::string text_lines(int lines) {
  std::string text;
  for (int i = 0; i < lines; ++i)
    text += "line " + std::to_string(i) + " of the sample text, with words the vocabulary knows.\n";
  return text;
}

/// A quiet request reading `dir`/in.txt (written with `text`) into `dir`/out.
PreprocessRequest request_in(const test::TempDir& dir, const std::string& text) {
  test::write_file(dir / "in.txt", text);
  PreprocessRequest request;
  request.inputs = {dir / "in.txt"};
  request.output = dir / "out";
  request.quiet = true;
  return request;
}

PreprocessOptions small_config() {
  PreprocessOptions c;
  c.max_seq_len = 32;
  c.documents = DocumentBoundary::kLine;
  c.piece_bytes = 1024;
  c.num_shards = 3;
  c.num_validation_shards = 1;
  c.validation_ratio = 0.1;
  return c;
}

TEST(DataPreprocessCommit, ThreeRanksWriteWhatOneRankWrites) {
  // The same request (its output folder is part of the run id) on 1 rank, then on 3 with
  // overwrite: byte-identical shards, and nothing else in the folder.
  test::TempDir dir("commit-good");
  PreprocessRequest request = request_in(dir, text_lines(400));
  const auto one = run_ranks(1, request, small_config());
  ASSERT_EQ(one[0].error, "");
  const std::vector<std::string> want{"train-00000-of-00003.h5", "train-00001-of-00003.h5", "train-00002-of-00003.h5",
                                      "validation-00000-of-00001.h5"};
  EXPECT_EQ(names_in(dir / "out"), want);
  std::map<std::string, std::string> written;
  for (const auto& name : want) written[name] = bytes_of(dir / "out/" + name);
  request.overwrite = true;
  const auto three = run_ranks(3, request, small_config());
  for (const auto& o : three) ASSERT_EQ(o.error, "");
  EXPECT_EQ(names_in(dir / "out"), want);
  for (const auto& name : want) EXPECT_EQ(bytes_of(dir / "out/" + name), written[name]) << name;
  for (const auto& o : three) {
    EXPECT_EQ(o.summary.train_sequences, one[0].summary.train_sequences);
    EXPECT_EQ(o.summary.validation_tokens, one[0].summary.validation_tokens);
  }
  EXPECT_GT(one[0].summary.train_sequences, 0);
  EXPECT_GT(one[0].summary.validation_sequences, 0);
  // The start-up ended once, before the writing (its waits bounded, the commit's not).
  for (const auto& o : three) EXPECT_EQ(o.work_begun, 1);
}

TEST(DataPreprocessCommit, ARankFailingToPlanStopsEveryRank) {
  test::TempDir dir("commit-plan");
  const PreprocessRequest request = request_in(dir, text_lines(100));
  // Rank 1 alone names a missing input: its error, on every rank.
  auto out = run_ranks(3, request, small_config(), [&](int r, PreprocessRequest& req, PreprocessOptions&) {
    if (r == 1) req.inputs = {dir / "missing.txt"};
  });
  expect_failed_cleanly(out, dir / "missing.txt", dir / "out");
  // Rank 2 alone splits with another seed: the ranks disagree on what the run is.
  out = run_ranks(3, request, small_config(), [&](int r, PreprocessRequest&, PreprocessOptions& c) {
    if (r == 2) c.seed = 99;
  });
  expect_failed_cleanly(out, "preprocess input check: rank 2 differs from rank 0", dir / "out");
}

TEST(DataPreprocessCommit, ARankFailingToWriteLeavesNoShardOfTheOthers) {
  // Pieces of 1 KiB go to train shard p mod 2 (rank p mod 2): invalid UTF-8 in a line of piece
  // 1 is read by rank 1 alone, after rank 0 has written its shard under a temporary name.
  test::TempDir dir("commit-write");
  std::string text = text_lines(100);
  const size_t line_start = text.find('\n', 1024 + 100) + 1;
  text.insert(line_start + 5, "\xFF");
  const PreprocessRequest request = request_in(dir, text);
  PreprocessOptions c = small_config();
  c.num_shards = 2;
  c.validation_ratio = 0;
  const auto out = run_ranks(2, request, c);
  expect_failed_cleanly(out, "invalid UTF-8 at byte " + std::to_string(line_start + 5), dir / "out");
}

TEST(DataPreprocessCommit, ARankFailingToCommitTakesBackTheOthersShards) {
  // An empty folder where rank 1's shard goes: its rename fails after rank 0's succeeded.
  test::TempDir dir("commit-rename");
  PreprocessRequest request = request_in(dir, text_lines(200));
  fs::create_directories(dir / "out/train-00001-of-00002.h5");
  request.overwrite = true;  // the folder counts as a shard already there
  PreprocessOptions c = small_config();
  c.num_shards = 2;
  const auto out = run_ranks(2, request, c);
  expect_failed_cleanly(out, dir / "out/train-00001-of-00002.h5" + ": cannot rename", dir / "out");
  EXPECT_TRUE(names_in(dir / "out").empty());
}

TEST(DataPreprocessCommit, AFolderWithShardsNeedsOverwrite) {
  test::TempDir dir("commit-existing");
  PreprocessRequest request = request_in(dir, text_lines(100));
  ASSERT_EQ(run_ranks(2, request, small_config())[0].error, "");
  const auto before = names_in(dir / "out");
  const auto again = run_ranks(2, request, small_config());
  EXPECT_NE(again[1].error.find("already holds shards"), std::string::npos) << again[1].error;
  EXPECT_EQ(names_in(dir / "out"), before);  // untouched
  // With overwrite and fewer shards: the stale one goes after success.
  request.overwrite = true;
  PreprocessOptions c = small_config();
  c.num_shards = 2;
  ASSERT_EQ(run_ranks(2, request, c)[0].error, "");
  EXPECT_EQ(names_in(dir / "out"), (std::vector<std::string>{"train-00000-of-00002.h5", "train-00001-of-00002.h5",
                                                             "validation-00000-of-00001.h5"}));
}

}  // namespace
}  // namespace tupe::data_pipeline
