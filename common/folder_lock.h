// One job per output folder: a lock file, <folder>/.tupe-lock, that a job holds from its
// start-up to its end (pre-training's checkpoint.dir, preprocess's --output, fine-tuning's
// finetune.output_dir). docs/clusters.md "One job per folder" has the rules for users.
//
// The file holds one JSON object naming its holder: host, pid, job id (SLURM_JOB_ID, else
// PBS_JOBID, else empty), Slurm restart count, the command, the start and the last heartbeat
// (Unix seconds, the holder's clock). Two mechanisms keep a second job out:
//  - flock(LOCK_EX) on the file, held for the job's life: the kernel releases it when the
//    holder dies however it dies, so on one host (and on file systems whose flock spans hosts:
//    NFSv4, Lustre mounted with -o flock) a live holder is certain and a dead one is certain;
//  - a heartbeat: a thread rewrites the record every stale_after_s / 8 seconds, so a holder
//    on another host, on a file system whose flock is host-local (Lustre -o localflock, NFS
//    with nolock), is alive while its heartbeat is younger than stale_after_s.
// Take-over: a record whose holder is gone (flock free on its own host; heartbeat older than
// the bound on another host), or that a previous attempt of the same Slurm job wrote (same job
// id, lower restart count: a re-queued job), is replaced with a notice naming it.
#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace tupe {

/// Who holds a folder lock (the lock file's record).
struct LockHolder {
  std::string host;
  int64_t pid = 0;
  std::string job_id;         ///< SLURM_JOB_ID, else PBS_JOBID, else ""
  int64_t restart_count = 0;  ///< SLURM_RESTART_COUNT (0 when unset)
  std::string command;        ///< e.g. "tupe pretrain"
  int64_t started_unix_s = 0;
  int64_t heartbeat_unix_s = 0;

  /// "tupe pretrain, pid 123 on node1 (job 77), started 2026-12-07 12:00:00 UTC, heartbeat 3 s ago"
  std::string describe(int64_t now_unix_s) const;
};

/// FolderLock's settings.
struct FolderLockOptions {
  std::string key = "output folder";  ///< how messages name the folder, e.g. "checkpoint.dir"
  std::string command = "tupe";       ///< written into the record, e.g. "tupe pretrain"
  /// A heartbeat older than this (seconds) marks a holder on another host as gone; the
  /// heartbeat period is a eighth of it (at least 1 s). Default: TUPE_LOCK_STALE_S, else 120.
  double stale_after_s = 120;
  /// Called once, on the heartbeat thread, when this job finds its lock taken over by another
  /// (its heartbeat stopped for longer than the bound: a stopped node that came back), with a
  /// one-line message; it should end the job. Empty: the message is logged as a warning.
  std::function<void(const std::string& message)> on_lost;
};

/// TUPE_LOCK_STALE_S (seconds, > 0), else 120. Throws tupe::Error naming the variable for a
/// value that is not a positive number.
double lock_stale_after_s_from_env();

/// The holder this process would write: this host, pid, job id and restart count from the
/// environment, `command`, the start and heartbeat set to now.
LockHolder this_process_as_holder(const std::string& command);

/// The lock of one folder, held until destruction (which stops the heartbeat and removes the
/// file if it still names this process). Not copyable, not movable.
class FolderLock {
 public:
  /// Creates `folder` if missing and takes its lock. Throws tupe::Error, one line:
  /// "<key> <folder> is in use by <holder>; ..." when a live job holds it, or naming the lock
  /// file and the system's cause when it cannot be created or written. `notice()` says
  /// which stale holder was replaced, if any.
  static std::unique_ptr<FolderLock> acquire(const std::filesystem::path& folder, const FolderLockOptions& options);

  ~FolderLock();
  FolderLock(const FolderLock&) = delete;
  FolderLock& operator=(const FolderLock&) = delete;

  /// "<key> <folder>: took over the lock of <holder> (<why>)", or "" for a free folder.
  const std::string& notice() const { return notice_; }
  /// <folder>/.tupe-lock
  const std::filesystem::path& path() const { return path_; }
  /// Whether the kernel's flock held on this file system (false: heartbeat only).
  bool flock_held() const { return flock_held_; }

 private:
  struct Heartbeat;
  FolderLock() = default;
  std::filesystem::path path_;
  int fd_ = -1;
  bool flock_held_ = false;
  LockHolder holder_;  ///< the record this process wrote (host, pid, start)
  std::string notice_;
  std::unique_ptr<Heartbeat> heartbeat_;
};

/// The lock file's name inside a folder.
inline constexpr const char* kFolderLockName = ".tupe-lock";

/// Parses a lock record (the file's text); nullopt for an empty or unreadable one.
std::optional<LockHolder> parse_lock_record(const std::string& text);
/// The record's text for `holder` (one JSON object and a newline).
std::string lock_record(const LockHolder& holder);

}  // namespace tupe
