// The bounded start-up's pieces that need no ranks (dist/startup.h): the deadline thread, the
// rank list of its message, the environment's limit and the stall hook's phase.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <thread>

#include "common/error.h"
#include "dist/options.h"
#include "dist/stall_injection.h"
#include "dist/startup.h"

using namespace tupe;
using namespace tupe::dist;

namespace {

/// Waits up to `limit` for `flag` (the watch thread's effect).
bool wait_for(const std::atomic<int>& flag, int want, std::chrono::milliseconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (flag.load() != want && std::chrono::steady_clock::now() < end)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  return flag.load() == want;
}

}  // namespace

TEST(StartupWatch, FiresOnceAtTheDeadlineAndNotWhenDisarmed) {
  StartupWatch watch;
  std::atomic<int> fired{0};
  const auto t0 = std::chrono::steady_clock::now();
  watch.arm(0.05, [&] { ++fired; });
  ASSERT_TRUE(wait_for(fired, 1, std::chrono::milliseconds(2000)));
  EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(50));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(fired.load(), 1);  // once, not again
  // Disarmed before the deadline: nothing fires.
  watch.arm(0.05, [&] { fired += 10; });
  watch.disarm();
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  EXPECT_EQ(fired.load(), 1);
  // Re-armed: the later deadline replaces the earlier one and its callback runs.
  watch.arm(0.02, [&] { fired += 100; });
  watch.arm(0.08, [&] { fired += 1000; });
  ASSERT_TRUE(wait_for(fired, 1001, std::chrono::milliseconds(2000)));
  // Armed with 0 seconds: unbounded (disarmed).
  watch.arm(0, [&] { fired += 5; });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(fired.load(), 1001);
}

TEST(StartupWatch, DestroyedWhileArmedDoesNotFire) {
  std::atomic<int> fired{0};
  {
    StartupWatch watch;
    watch.arm(0.2, [&] { ++fired; });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(fired.load(), 0);
}

TEST(StartupMessage, DescribeRanksJoinsConsecutiveRanksOfOneHost) {
  const std::vector<std::string> hosts = {"node1", "node1", "node2", "node2", "node2", "node3"};
  EXPECT_EQ(describe_ranks({2, 3, 4}, hosts), "ranks 2-4 (node2)");
  EXPECT_EQ(describe_ranks({1, 2, 3}, hosts), "rank 1 (node1), ranks 2-3 (node2)");
  EXPECT_EQ(describe_ranks({0, 5}, hosts), "rank 0 (node1), rank 5 (node3)");
  EXPECT_EQ(describe_ranks({4}, {}), "rank 4");  // hosts not known
  EXPECT_EQ(describe_ranks({}, hosts), "");
}

TEST(StartupTimeout, FromTheEnvironment) {
  ::unsetenv(kStartupTimeoutEnv);
  EXPECT_EQ(startup_timeout_from_env(), kDefaultStartupTimeout_s);
  ::setenv(kStartupTimeoutEnv, "2.5", 1);
  EXPECT_EQ(startup_timeout_from_env(), 2.5);
  ::setenv(kStartupTimeoutEnv, "0", 1);
  EXPECT_EQ(startup_timeout_from_env(), 0.0);
  for (const char* bad : {"-1", "soon"}) {
    ::setenv(kStartupTimeoutEnv, bad, 1);
    try {
      startup_timeout_from_env();
      ADD_FAILURE() << "no error for '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()).rfind("TUPE_STARTUP_TIMEOUT_S", 0), 0u) << e.what();
    }
  }
  ::unsetenv(kStartupTimeoutEnv);
}

TEST(StartupTimeout, DistStartupLimitFallsBackToTheCollectiveTimeout) {
  DistOptions o;
  EXPECT_EQ(o.startup_timeout_s, 0.0);
  EXPECT_EQ(o.startup_limit_s(), o.timeout_s);  // 600 s by default
  o.timeout_s = 15;
  EXPECT_EQ(o.startup_limit_s(), 15.0);
  o.startup_timeout_s = 120;
  EXPECT_EQ(o.startup_limit_s(), 120.0);
  DistOptions::fields().apply(o, {{"startup_timeout_s", "-1"}}, "cfg.ini [dist]");
  EXPECT_THROW(o.validate(), Error);
}

TEST(StartupStall, PhaseNamesAStartupPhase) {
  const StallInjection s = parse_stall_injection("rank=2,phase=config check,seconds=60");
  EXPECT_EQ(s.rank, 2);
  EXPECT_EQ(s.phase, "config check");
  EXPECT_EQ(s.seconds, 60.0);
  EXPECT_TRUE(parse_stall_injection("rank=1").phase.empty());
  EXPECT_EQ(parse_stall_injection("rank=1,phase=placement,marker=/x/y").marker, "/x/y");
  EXPECT_THROW(parse_stall_injection("rank=1,phase="), Error);
}
