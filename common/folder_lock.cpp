// One job per output folder (folder_lock.h has the rules).
#include "common/folder_lock.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "common/error.h"
#include "common/host_name.h"
#include "common/log.h"

namespace tupe {

namespace {

int64_t now_unix_s() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string utc_time(int64_t unix_s) {
  const std::time_t t = static_cast<std::time_t>(unix_s);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S UTC", &tm);
  return buf;
}

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

/// The whole file's text through `fd` (pread from 0; the record is small).
std::string read_all(int fd) {
  std::string text;
  char buf[4096];
  off_t offset = 0;
  for (;;) {
    const ssize_t n = pread(fd, buf, sizeof buf, offset);
    if (n <= 0) break;
    text.append(buf, static_cast<size_t>(n));
    offset += n;
  }
  return text;
}

/// The record through `fd`, read twice 50 ms apart if the first read is torn (a holder's
/// heartbeat rewrites it in place).
std::optional<LockHolder> read_record(int fd, bool* unreadable) {
  std::string text = read_all(fd);
  std::optional<LockHolder> holder = parse_lock_record(text);
  if (!holder && !text.empty()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    text = read_all(fd);
    holder = parse_lock_record(text);
  }
  if (unreadable) *unreadable = !holder && !text.empty();
  return holder;
}

/// Rewrites the file's text in place: one pwrite from 0, then the length cut to it.
bool write_record(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = pwrite(fd, text.data() + done, text.size() - done, static_cast<off_t>(done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    done += static_cast<size_t>(n);
  }
  return ftruncate(fd, static_cast<off_t>(text.size())) == 0 && fdatasync(fd) == 0;
}

bool same_holder(const LockHolder& a, const LockHolder& b) {
  return a.host == b.host && a.pid == b.pid && a.started_unix_s == b.started_unix_s;
}

bool process_alive(int64_t pid) { return pid > 0 && (kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM); }

}  // namespace

std::string LockHolder::describe(int64_t now) const {
  std::string s = (command.empty() ? std::string("a job") : command) + ", pid " + std::to_string(pid) + " on " + host;
  if (!job_id.empty()) s += " (job " + job_id + (restart_count > 0 ? ", restart " + std::to_string(restart_count) : "") + ")";
  s += ", started " + utc_time(started_unix_s) + ", heartbeat " + std::to_string(now - heartbeat_unix_s) + " s ago";
  return s;
}

std::string lock_record(const LockHolder& h) {
  const nlohmann::json j = {{"host", h.host},
                            {"pid", h.pid},
                            {"job_id", h.job_id},
                            {"restart_count", h.restart_count},
                            {"command", h.command},
                            {"started_unix_s", h.started_unix_s},
                            {"heartbeat_unix_s", h.heartbeat_unix_s}};
  return j.dump() + "\n";
}

std::optional<LockHolder> parse_lock_record(const std::string& text) {
  if (text.empty()) return std::nullopt;
  try {
    const nlohmann::json j = nlohmann::json::parse(text);
    LockHolder h;
    h.host = j.at("host").get<std::string>();
    h.pid = j.at("pid").get<int64_t>();
    h.job_id = j.value("job_id", std::string());
    h.restart_count = j.value("restart_count", int64_t{0});
    h.command = j.value("command", std::string());
    h.started_unix_s = j.at("started_unix_s").get<int64_t>();
    h.heartbeat_unix_s = j.at("heartbeat_unix_s").get<int64_t>();
    return h;
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;
  }
}

double lock_stale_after_s_from_env() {
  const std::string v = env_or_empty("TUPE_LOCK_STALE_S");
  if (v.empty()) return 120;
  char* end = nullptr;
  const double s = std::strtod(v.c_str(), &end);
  TUPE_CHECK(end && *end == '\0' && s > 0 && s < 1e9,
             "TUPE_LOCK_STALE_S: '" << v << "' is not a positive number of seconds");
  return s;
}

LockHolder this_process_as_holder(const std::string& command) {
  LockHolder me;
  me.host = host_name();
  me.pid = static_cast<int64_t>(getpid());
  me.job_id = env_or_empty("SLURM_JOB_ID");
  if (me.job_id.empty()) me.job_id = env_or_empty("PBS_JOBID");
  const std::string restarts = env_or_empty("SLURM_RESTART_COUNT");
  me.restart_count = restarts.empty() ? 0 : std::strtoll(restarts.c_str(), nullptr, 10);
  me.command = command;
  me.started_unix_s = me.heartbeat_unix_s = now_unix_s();
  return me;
}

/// The heartbeat thread: rewrites the record's heartbeat every period until stopped; stops
/// beating (with one warning) if the file names another holder.
struct FolderLock::Heartbeat {
  std::mutex mu;
  std::condition_variable cv;
  bool stop = false;
  std::thread thread;
  ~Heartbeat() {
    {
      std::lock_guard<std::mutex> lk(mu);
      stop = true;
    }
    cv.notify_all();
    if (thread.joinable()) thread.join();
  }
};

std::unique_ptr<FolderLock> FolderLock::acquire(const std::filesystem::path& folder, const FolderLockOptions& options) {
  std::error_code ec;
  std::filesystem::create_directories(folder, ec);
  TUPE_CHECK(!ec, options.key << " " << folder.string() << ": cannot create the folder: " << ec.message());
  std::unique_ptr<FolderLock> lock(new FolderLock());
  lock->path_ = folder / kFolderLockName;
  const std::string path = lock->path_.string();
  LockHolder me = this_process_as_holder(options.command);
  const std::string in_use = options.key + " " + folder.string() + " is in use by ";
  const std::string advice =
      "; wait for it to end or use another folder (a lock whose holder is gone is taken over: docs/clusters.md "
      "\"One job per folder\")";
  for (int attempt = 0;; ++attempt) {
    TUPE_CHECK(attempt < 10, path << ": the lock file keeps being replaced by another job; retry");
    const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    TUPE_CHECK(fd >= 0, path << ": cannot open the lock file: " << std::strerror(errno));
    bool held = true;
    std::string frozen_why;  // a live holder whose heartbeat stopped (a stopped node, a frozen process)
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      if (err == EWOULDBLOCK) {  // a holder's process exists (on this host, or flock spans hosts)
        const std::optional<LockHolder> h = read_record(fd, nullptr);
        const int64_t now = now_unix_s();
        if (!h || static_cast<double>(now - h->heartbeat_unix_s) <= options.stale_after_s) {
          close(fd);
          TUPE_FAIL(in_use << (h ? h->describe(now) : std::string("a job whose record is not written yet")) << advice);
        }
        frozen_why = "its heartbeat is " + std::to_string(now - h->heartbeat_unix_s) + " s old, over the " +
                     std::to_string(static_cast<int64_t>(options.stale_after_s)) +
                     " s bound (TUPE_LOCK_STALE_S), though its process still holds the file: a stopped node?";
      } else {
        TUPE_CHECK(err == ENOLCK || err == EOPNOTSUPP || err == ENOSYS || err == EINVAL,
                   path << ": cannot lock the lock file: " << std::strerror(err));
      }
      held = false;  // no flock here: the heartbeat alone tells a live holder
    }
    // The path may have been removed (a holder ending) between our open and our lock.
    struct stat by_fd {}, by_path {};
    if (fstat(fd, &by_fd) != 0 || stat(path.c_str(), &by_path) != 0 || by_fd.st_ino != by_path.st_ino ||
        by_fd.st_dev != by_path.st_dev) {
      close(fd);
      continue;
    }
    bool unreadable = false;
    std::optional<LockHolder> previous = read_record(fd, &unreadable);
    const int64_t now = now_unix_s();
    std::string why;
    if (!frozen_why.empty()) {
      why = frozen_why;
    } else if (unreadable) {  // a torn or foreign text: only its age tells
      if (!held && now - static_cast<int64_t>(by_path.st_mtime) <= options.stale_after_s) {
        close(fd);
        TUPE_FAIL(in_use << "a job whose record (" << path << ") cannot be read, written "
                         << now - static_cast<int64_t>(by_path.st_mtime) << " s ago" << advice);
      }
      why = "an unreadable record";
    } else if (previous) {
      const double age_s = static_cast<double>(now - previous->heartbeat_unix_s);
      const bool same_job_earlier_attempt =
          !me.job_id.empty() && previous->job_id == me.job_id && previous->restart_count < me.restart_count;
      if (previous->host == me.host && held) {
        why = "its process is gone";
      } else if (previous->host == me.host && !process_alive(previous->pid)) {
        why = "its process is gone";
      } else if (same_job_earlier_attempt) {
        why = "an earlier attempt of the re-queued job " + me.job_id;
      } else if (previous->host != me.host && age_s > options.stale_after_s) {
        why = "its heartbeat is " + std::to_string(now - previous->heartbeat_unix_s) + " s old, over the " +
              std::to_string(static_cast<int64_t>(options.stale_after_s)) + " s bound (TUPE_LOCK_STALE_S)";
      } else {
        close(fd);
        TUPE_FAIL(in_use << previous->describe(now) << advice);
      }
    }
    if (!why.empty())
      lock->notice_ = options.key + " " + folder.string() + ": took over the lock of " +
                      (previous ? previous->describe(now) : std::string("an earlier job")) + " (" + why + ")";
    me.heartbeat_unix_s = now;
    if (!write_record(fd, lock_record(me))) {
      const int err = errno;
      close(fd);
      TUPE_FAIL(path << ": cannot write the lock file: " << std::strerror(err));
    }
    lock->fd_ = fd;
    lock->flock_held_ = held;
    lock->holder_ = me;
    break;
  }
  // The heartbeat: every stale_after_s / 8 (at least 1 s).
  const auto period = std::chrono::milliseconds(static_cast<int64_t>(std::max(1.0, options.stale_after_s / 8) * 1000));
  lock->heartbeat_ = std::make_unique<Heartbeat>();
  Heartbeat* hb = lock->heartbeat_.get();
  const int fd = lock->fd_;
  const auto on_lost = options.on_lost;
  hb->thread = std::thread([hb, fd, path, period, me, on_lost]() mutable {
    std::unique_lock<std::mutex> lk(hb->mu);
    while (!hb->cv.wait_for(lk, period, [hb] { return hb->stop; })) {
      const std::optional<LockHolder> now_in_file = read_record(fd, nullptr);
      if (now_in_file && !same_holder(*now_in_file, me)) {
        const std::string message = path + ": this job's lock was taken over by " +
                                    now_in_file->describe(now_unix_s()) +
                                    " (this job's heartbeat stopped for longer than TUPE_LOCK_STALE_S)";
        lk.unlock();
        if (on_lost)
          on_lost(message);
        else
          log::warn(message);
        return;
      }
      me.heartbeat_unix_s = now_unix_s();
      if (!write_record(fd, lock_record(me))) log::warn(path + ": cannot renew the lock's heartbeat: " + std::strerror(errno));
    }
  });
  return lock;
}

FolderLock::~FolderLock() {
  heartbeat_.reset();  // stops and joins the thread
  if (fd_ < 0) return;
  const std::optional<LockHolder> in_file = read_record(fd_, nullptr);
  if (in_file && same_holder(*in_file, holder_)) {
    // Removed while still locked: a job that opened the old file finds it unlinked and retries.
    if (unlink(path_.c_str()) != 0) (void)ftruncate(fd_, 0);
  }
  close(fd_);
}

}  // namespace tupe
