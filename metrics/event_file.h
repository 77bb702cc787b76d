// TensorBoard event files: scalars a run writes for `tensorboard --logdir <run folder>`
// (docs/formats.md "TensorBoard event files").
//
// File: <dir>/events.out.tfevents.<unix seconds>.<host>.<pid> (TensorBoard picks up any
// file whose name contains "tfevents"). Records are TFRecord-framed protobuf `Event`s
// (metrics/tensorboard_event.proto), the first a file_version "brain.Event:2":
//   uint64 length (little-endian) | uint32 masked_crc32c(length bytes) |
//   length bytes of data          | uint32 masked_crc32c(data)
// with masked_crc32c(x) = ((c >> 15) | (c << 17)) + 0xA282EAD8, c = CRC-32C(x).
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace tupe::metrics {

/// Whether this build writes event files (configured with TUPE_TENSORBOARD=ON, the default;
/// metrics/CMakeLists.txt). When false, EventFileWriter's constructor throws tupe::Error.
bool tensorboard_built_in();

/// The masked CRC-32C of a TFRecord frame (see the file comment).
uint32_t masked_crc32c(const void* data, size_t n);

/// One event file, appended record by record and flushed after each `write_scalars`, so
/// a crash loses at most the step being written. Not copyable; closes the file on
/// destruction. Throws tupe::Error "<file>: <cause>" when the folder cannot be created or
/// the file cannot be written.
class EventFileWriter {
 public:
  /// Creates `dir` (and parents) and a new event file in it; writes the version record.
  explicit EventFileWriter(const std::string& dir);
  ~EventFileWriter();
  EventFileWriter(const EventFileWriter&) = delete;
  EventFileWriter& operator=(const EventFileWriter&) = delete;

  /// One Event at `step` holding every (tag, value) pair; values are stored as float32
  /// (TensorBoard's scalar type). `wall_time_s`: seconds since the Unix epoch.
  void write_scalars(int64_t step, double wall_time_s, const std::vector<std::pair<std::string, double>>& scalars);

  const std::string& path() const { return path_; }

 private:
  void write_record(const std::string& data);
  std::string path_;
  std::FILE* file_ = nullptr;
};

/// The scalars of one metrics JSONL record (the per-rank metrics log): every number except
/// "step" and "epoch", tagged "<group>/<key>". Keys beginning "validation_" go to group
/// "validation" without that prefix ("validation_loss" -> "validation/loss"); the others to
/// `group` ("loss" -> "train/loss"). Booleans, strings and nested values are skipped.
std::vector<std::pair<std::string, double>> scalars_of_record(const nlohmann::json& record,
                                                              const std::string& group);

}  // namespace tupe::metrics
