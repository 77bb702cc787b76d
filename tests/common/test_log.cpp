// The console log (common/log.h): which rank prints which level, the rank tags, the
// one-line error format, level parsing with one-line errors, and that records written from
// many threads at once arrive as whole lines.
#include <gtest/gtest.h>

#include <cstdio>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/error.h"
#include "common/log.h"

namespace tupe {
namespace {

/// Captures the log into two streams for one test and restores every setting after it.
class LogCapture {
 public:
  LogCapture(int rank, int world_size, log::Level level, log::Ranks ranks) {
    log::redirect_for_test(&out, &err);
    log::set_rank(rank, world_size);
    log::set_level(level);
    log::set_ranks(ranks);
  }
  ~LogCapture() {
    log::redirect_for_test(nullptr, nullptr);
    log::set_rank(0, 1);
    log::set_level(log::Level::kInfo);
    log::set_ranks(log::Ranks::kRankZero);
    log::send_info_to_stderr(false);
  }
  void all_levels() {
    log::debug("d");
    log::info("i");
    log::warn("w");
  }
  std::ostringstream out, err;
};

TEST(CommonLog, OneProcessPrintsInfoBareAndWarningsTagged) {
  LogCapture c(0, 1, log::Level::kInfo, log::Ranks::kRankZero);
  c.all_levels();
  EXPECT_EQ(c.out.str(), "i\n");
  EXPECT_EQ(c.err.str(), "tupe: warning: w\n");
}

TEST(CommonLog, RankZeroAloneInfosUnderMpiAndEveryRankWarns) {
  {
    LogCapture c(0, 4, log::Level::kInfo, log::Ranks::kRankZero);
    c.all_levels();
    EXPECT_EQ(c.out.str(), "i\n");  // the job's voice: no tag
    EXPECT_EQ(c.err.str(), "tupe: rank 0: warning: w\n");
  }
  {
    LogCapture c(3, 4, log::Level::kInfo, log::Ranks::kRankZero);
    c.all_levels();
    EXPECT_EQ(c.out.str(), "");
    EXPECT_EQ(c.err.str(), "tupe: rank 3: warning: w\n");
  }
}

TEST(CommonLog, EveryRankAndDebugCarryTheRankTag) {
  LogCapture c(2, 4, log::Level::kDebug, log::Ranks::kAll);
  c.all_levels();
  EXPECT_EQ(c.out.str(), "[rank 2] debug: d\n[rank 2] i\n");
  EXPECT_EQ(c.err.str(), "tupe: rank 2: warning: w\n");
  EXPECT_TRUE(log::enabled(log::Level::kDebug));
}

TEST(CommonLog, LevelsFilterLowerRecordsButNeverTheEndingError) {
  LogCapture c(0, 2, log::Level::kWarn, log::Ranks::kAll);
  c.all_levels();
  EXPECT_EQ(c.out.str(), "");
  EXPECT_EQ(c.err.str(), "tupe: rank 0: warning: w\n");
  log::set_level(log::Level::kOff);
  c.all_levels();
  log::error("pretrain", "error", "a.ini [model] hidden_size: not a number", true);
  log::error("export", "internal error", "boom", false);
  log::fatal("tupe: watchdog: rank 0: stalled");
  EXPECT_EQ(c.out.str(), "");
  EXPECT_EQ(c.err.str(),
            "tupe: rank 0: warning: w\n"
            "tupe pretrain: rank 0: error: a.ini [model] hidden_size: not a number\n"
            "tupe export: internal error: boom\n"
            "tupe: watchdog: rank 0: stalled\n");
}

TEST(CommonLog, InfoCanMoveToStderrWhenStdoutCarriesData) {
  LogCapture c(0, 1, log::Level::kInfo, log::Ranks::kRankZero);
  log::send_info_to_stderr(true);
  c.all_levels();
  EXPECT_EQ(c.out.str(), "");
  EXPECT_EQ(c.err.str(), "i\ntupe: warning: w\n");
}

TEST(CommonLog, LevelAndRankNamesParseAndBadOnesNameTheirSource) {
  EXPECT_EQ(log::parse_level("debug", "x"), log::Level::kDebug);
  EXPECT_EQ(log::parse_level("warning", "x"), log::Level::kWarn);
  EXPECT_EQ(log::parse_level("off", "x"), log::Level::kOff);
  for (auto l : {log::Level::kDebug, log::Level::kInfo, log::Level::kWarn, log::Level::kError, log::Level::kOff})
    EXPECT_EQ(log::parse_level(log::to_string(l), "x"), l);
  EXPECT_EQ(log::parse_ranks("all", "x"), log::Ranks::kAll);
  EXPECT_EQ(log::parse_ranks("0", "x"), log::Ranks::kRankZero);
  try {
    log::parse_level("verbose", "TUPE_LOG_LEVEL");
    ADD_FAILURE() << "no error for 'verbose'";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "TUPE_LOG_LEVEL: unknown log level 'verbose' (debug, info, warn, error, off)");
  }
  EXPECT_THROW(log::parse_ranks("1", "--log-ranks"), Error);
}

TEST(CommonLog, RecordsFromManyThreadsArriveAsWholeLines) {
  LogCapture c(1, 2, log::Level::kInfo, log::Ranks::kAll);
  const int threads = 4, per_thread = 500;
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([t] {
      for (int i = 0; i < per_thread; ++i) log::info("thread " + std::to_string(t) + " record " + std::to_string(i));
    });
  for (auto& th : pool) th.join();
  std::istringstream lines(c.out.str());
  std::string line;
  std::vector<int> next(threads, 0);
  int count = 0;
  while (std::getline(lines, line)) {
    int t = -1, i = -1;
    ASSERT_EQ(std::sscanf(line.c_str(), "[rank 1] thread %d record %d", &t, &i), 2) << line;
    ASSERT_TRUE(t >= 0 && t < threads) << line;
    EXPECT_EQ(i, next[t]++) << "thread " << t << "'s records out of order";
    ++count;
  }
  EXPECT_EQ(count, threads * per_thread);
}

}  // namespace
}  // namespace tupe
