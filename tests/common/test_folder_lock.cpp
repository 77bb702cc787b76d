// common/folder_lock.h: one job per folder. Each take-over rule and each refusal is driven by a
// record written by the test (a dead pid, another host, an old heartbeat, a re-queued Slurm
// job) and, for a live holder, by a second open file description holding flock, as a second
// process would.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

#include "common/error.h"
#include "common/folder_lock.h"
#include "tests/common/common_test_util.h"

namespace tupe {
namespace {

using common_test::error_of;
using common_test::ScratchDir;

int64_t now_s() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_text(const std::filesystem::path& p, const std::string& text) { std::ofstream(p, std::ios::trunc) << text; }

FolderLockOptions options(double stale_after_s = 120) {
  FolderLockOptions o;
  o.key = "checkpoint.dir";
  o.command = "tupe pretrain";
  o.stale_after_s = stale_after_s;
  return o;
}

/// A pid that no longer exists: a child that has exited and been reaped.
int64_t dead_pid() {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ::waitpid(child, nullptr, 0);
  return child;
}

TEST(FolderLock, FreeFolderTakenAndReleased) {
  ScratchDir dir("lock-free");
  const auto folder = dir.path() / "run";  // created by the lock
  {
    const auto lock = FolderLock::acquire(folder, options());
    EXPECT_TRUE(lock->notice().empty());
    EXPECT_TRUE(lock->flock_held());
    const std::optional<LockHolder> h = parse_lock_record(read_text(folder / kFolderLockName));
    ASSERT_TRUE(h);
    EXPECT_EQ(h->pid, static_cast<int64_t>(::getpid()));
    EXPECT_EQ(h->command, "tupe pretrain");
    EXPECT_LE(std::abs(h->heartbeat_unix_s - now_s()), 2);
  }
  EXPECT_FALSE(std::filesystem::exists(folder / kFolderLockName));  // removed on release
  EXPECT_TRUE(std::filesystem::is_directory(folder));
}

TEST(FolderLock, SecondJobRefusedNamingTheHolder) {
  ScratchDir dir("lock-busy");
  const auto first = FolderLock::acquire(dir.path(), options());
  const std::string e = error_of([&] { FolderLock::acquire(dir.path(), options()); });
  EXPECT_NE(e.find("checkpoint.dir " + dir.path().string() + " is in use by tupe pretrain, pid " +
                   std::to_string(::getpid())),
            std::string::npos)
      << e;
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  // The refusal leaves the holder's record as it was.
  const auto h = parse_lock_record(read_text(dir.path() / kFolderLockName));
  ASSERT_TRUE(h);
  EXPECT_EQ(h->pid, static_cast<int64_t>(::getpid()));
}

TEST(FolderLock, DeadHolderOnThisHostTakenOver) {
  ScratchDir dir("lock-dead");
  LockHolder gone = this_process_as_holder("tupe preprocess");
  gone.pid = dead_pid();
  write_text(dir.path() / kFolderLockName, lock_record(gone));  // as a SIGKILLed job leaves it
  const auto lock = FolderLock::acquire(dir.path(), options());
  EXPECT_NE(lock->notice().find("took over the lock of tupe preprocess, pid " + std::to_string(gone.pid)),
            std::string::npos)
      << lock->notice();
  EXPECT_NE(lock->notice().find("its process is gone"), std::string::npos) << lock->notice();
  EXPECT_EQ(parse_lock_record(read_text(dir.path() / kFolderLockName))->pid, static_cast<int64_t>(::getpid()));
}

TEST(FolderLock, OtherHostByItsHeartbeat) {
  ScratchDir dir("lock-remote");
  LockHolder remote = this_process_as_holder("tupe finetune");
  remote.host = "a-node-that-is-not-this-one";
  remote.heartbeat_unix_s = now_s() - 10;  // alive: younger than the bound
  write_text(dir.path() / kFolderLockName, lock_record(remote));
  const std::string e = error_of([&] { FolderLock::acquire(dir.path(), options(120)); });
  EXPECT_NE(e.find("is in use by tupe finetune"), std::string::npos) << e;
  EXPECT_NE(e.find("on a-node-that-is-not-this-one"), std::string::npos) << e;

  remote.heartbeat_unix_s = now_s() - 500;  // gone: older than the bound
  write_text(dir.path() / kFolderLockName, lock_record(remote));
  const auto lock = FolderLock::acquire(dir.path(), options(120));
  EXPECT_NE(lock->notice().find("s old, over the 120 s bound"), std::string::npos) << lock->notice();
}

TEST(FolderLock, RequeuedSlurmJobTakesOverItsEarlierAttempt) {
  ScratchDir dir("lock-requeue");
  ::setenv("SLURM_JOB_ID", "4242", 1);
  ::setenv("SLURM_RESTART_COUNT", "1", 1);
  LockHolder earlier = this_process_as_holder("tupe pretrain");
  earlier.host = "the-failed-node";
  earlier.restart_count = 0;
  earlier.heartbeat_unix_s = now_s();  // its heartbeat is fresh: the node died a moment ago
  write_text(dir.path() / kFolderLockName, lock_record(earlier));
  {
    const auto lock = FolderLock::acquire(dir.path(), options());
    EXPECT_NE(lock->notice().find("an earlier attempt of the re-queued job 4242"), std::string::npos)
        << lock->notice();
    const auto h = parse_lock_record(read_text(dir.path() / kFolderLockName));
    EXPECT_EQ(h->job_id, "4242");
    EXPECT_EQ(h->restart_count, 1);
  }
  earlier.restart_count = 1;  // the same attempt on another node: a live job step
  write_text(dir.path() / kFolderLockName, lock_record(earlier));
  const std::string e = error_of([&] { FolderLock::acquire(dir.path(), options()); });
  ::unsetenv("SLURM_JOB_ID");
  ::unsetenv("SLURM_RESTART_COUNT");
  EXPECT_NE(e.find("(job 4242, restart 1)"), std::string::npos) << e;
}

TEST(FolderLock, LiveProcessWithAStoppedHeartbeatTakenOver) {
  // Another open file description holds flock, as a SIGSTOPped holder's process does.
  ScratchDir dir("lock-frozen");
  const auto path = dir.path() / kFolderLockName;
  LockHolder frozen = this_process_as_holder("tupe pretrain");
  frozen.pid = dead_pid();
  frozen.heartbeat_unix_s = now_s() - 5;
  write_text(path, lock_record(frozen));
  const int fd = ::open(path.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX | LOCK_NB), 0);
  EXPECT_NE(error_of([&] { FolderLock::acquire(dir.path(), options(60)); }).find("is in use by"), std::string::npos);
  frozen.heartbeat_unix_s = now_s() - 61;
  write_text(path, lock_record(frozen));
  {
    const auto lock = FolderLock::acquire(dir.path(), options(60));
    EXPECT_FALSE(lock->flock_held());
    EXPECT_NE(lock->notice().find("still holds the file"), std::string::npos) << lock->notice();
  }
  ::close(fd);
}

TEST(FolderLock, HeartbeatAdvancesWhileHeld) {
  ScratchDir dir("lock-beat");
  const auto lock = FolderLock::acquire(dir.path(), options(8));  // a beat every second
  const int64_t first = parse_lock_record(read_text(lock->path()))->heartbeat_unix_s;
  int64_t later = first;
  for (int i = 0; i < 50 && later == first; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const auto h = parse_lock_record(read_text(lock->path()));
    if (h) later = h->heartbeat_unix_s;
  }
  EXPECT_GT(later, first);
}

TEST(FolderLock, UnreadableRecordWithNoHolderTakenOver) {
  ScratchDir dir("lock-garbage");
  write_text(dir.path() / kFolderLockName, "not a lock record");
  const auto lock = FolderLock::acquire(dir.path(), options());
  EXPECT_NE(lock->notice().find("an unreadable record"), std::string::npos) << lock->notice();
}

TEST(FolderLock, StaleBoundFromTheEnvironment) {
  ::unsetenv("TUPE_LOCK_STALE_S");
  EXPECT_EQ(lock_stale_after_s_from_env(), 120);
  ::setenv("TUPE_LOCK_STALE_S", "30", 1);
  EXPECT_EQ(lock_stale_after_s_from_env(), 30);
  ::setenv("TUPE_LOCK_STALE_S", "soon", 1);
  EXPECT_NE(error_of([] { lock_stale_after_s_from_env(); }).find("TUPE_LOCK_STALE_S: 'soon'"), std::string::npos);
  ::unsetenv("TUPE_LOCK_STALE_S");
}

}  // namespace
}  // namespace tupe
