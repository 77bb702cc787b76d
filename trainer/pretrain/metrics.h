// Metrics of a training run: every rank appends JSON lines to its own file
// (<metrics_dir>/rank_<r>.jsonl), and rank 0 prints a progress line (rewritten in place on
// a terminal, plain log lines otherwise).
#pragma once
#include <cstdint>
#include <fstream>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "metrics/event_file.h"

namespace tupe::pretrain {

/// Appends one JSON object per line; flushed after each record (a crash loses at most the
/// line being written). With `tensorboard` given, every record is also written there as
/// scalars at its "step" (metrics::scalars_of_record, group "train": "train/loss",
/// "validation/loss", ...), so TensorBoard shows exactly the JSONL's numbers (as float32).
/// Throws tupe::Error "<file>: cannot open" when the folder is unwritable.
class MetricsLog {
 public:
  /// `resumed_at` >= 0: the run resumed from that step, so the records of an existing file
  /// after it (steps a crashed or abandoned run logged past its last kept checkpoint, and a
  /// line cut short by a crash) are dropped first (rewritten atomically), and each step
  /// appears once. -1: a fresh start, appending.
  MetricsLog(const std::string& dir, int rank, std::unique_ptr<metrics::EventFileWriter> tensorboard = nullptr,
             int64_t resumed_at = -1);
  void write(const nlohmann::json& record);
  const std::string& path() const { return path_; }
  /// The event file, or nullptr when TensorBoard is off.
  const metrics::EventFileWriter* tensorboard() const { return tensorboard_.get(); }

 private:
  std::string path_;
  std::ofstream out_;
  std::unique_ptr<metrics::EventFileWriter> tensorboard_;
};

/// What one progress line shows.
struct ProgressLine {
  int64_t step = 0, max_steps = 0;
  double loss = 0;  ///< MLM loss (nats per masked token), global
  double lr = 0;
  double grad_norm = 0;  ///< pre-clip global L2 norm
  double loss_scale = 1;
  double tokens_per_s = 0;  ///< global padded tokens per second
  double eta_s = 0;         ///< seconds to max_steps at the recent pace
  double mfu = -1;          ///< model FLOPs utilisation in [0, 1]; < 0 = not shown (CPU)
  int64_t skipped = 0;      ///< fp16 steps skipped so far
};

/// Rank 0's progress line and the job's messages, through common/log.h (info level: a
/// message prints on rank 0, or on every rank with --log-ranks all; --log-level warn
/// silences both).
class Progress {
 public:
  /// `lines`: print progress lines (pass false on ranks other than 0). On a real terminal
  /// of a process no MPI or SLURM launcher started (a launcher's pseudo-terminal usually
  /// ends in a log file) one line is rewritten in place; otherwise one plain line per log
  /// step. TUPE_PROGRESS=tty or lines forces either mode; any other value throws tupe::Error.
  explicit Progress(bool lines);
  void update(const ProgressLine& p);
  /// A message on its own line (ends an in-place line first).
  void message(const std::string& text);

 private:
  bool lines_, tty_;
  bool open_line_ = false;
};

/// "1h02m", "3m20s", "42s".
std::string format_duration(double seconds);

}  // namespace tupe::pretrain
