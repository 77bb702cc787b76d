// Durable file output for checkpoints: every file is written in full, fsynced, and put in
// place by rename(2) followed by an fsync of the parent folder, so that after a crash or
// power loss a file (or a whole checkpoint folder) is either whole or absent.
// Errors are tupe::Error naming the path and the system's cause (strerror).
#pragma once
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace tupe::checkpoint {

/// A file opened for writing (created or truncated). write() appends; commit() fsyncs and
/// closes it. Destroying it without commit() closes and removes the file (an error path
/// leaves nothing half-written behind).
class DurableFile {
 public:
  /// Throws tupe::Error "<path>: cannot create: <cause>".
  explicit DurableFile(std::filesystem::path path);
  ~DurableFile();
  DurableFile(const DurableFile&) = delete;
  DurableFile& operator=(const DurableFile&) = delete;

  /// Appends `size_bytes` bytes; throws tupe::Error naming the path and byte offset.
  void write(const void* data, size_t size_bytes);
  /// fsync + close; throws tupe::Error on failure. Afterwards the file is kept.
  void commit();
  /// Bytes written so far.
  uint64_t size_bytes() const { return written_bytes_; }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  int fd_ = -1;
  uint64_t written_bytes_ = 0;
};

/// fsync of a folder (makes renames and new entries in it durable); throws tupe::Error.
void fsync_directory(const std::filesystem::path& dir);

/// rename(2) `from` -> `to` (same file system), then fsync the parent folder of `to`.
/// Throws tupe::Error naming both paths.
void durable_rename(const std::filesystem::path& from, const std::filesystem::path& to);

/// durable_rename(temp, path); on failure removes `temp` and rethrows (the last step of
/// every atomic file write: write_file_atomic, write_safetensors).
void commit_temp_file(const std::filesystem::path& temp, const std::filesystem::path& path);

/// Replaces `path` with `bytes` atomically: writes "<dir>/.<name>.tmp-<pid>", fsyncs it,
/// renames it over `path`, fsyncs the folder. Throws tupe::Error naming the path.
void write_file_atomic(const std::filesystem::path& path, std::string_view bytes);

/// The temporary sibling used by write_file_atomic: "<dir>/.<name>.tmp-<pid>".
std::filesystem::path temp_sibling(const std::filesystem::path& path);

/// Reads a whole (small) file; throws tupe::Error "<path>: cannot read: <cause>".
std::string read_file_bytes(const std::filesystem::path& path);

/// Lower-case hex of bytes, e.g. {0x0f, 0xa0} -> "0fa0".
std::string to_hex(const uint8_t* data, size_t size_bytes);
/// Inverse of to_hex; throws tupe::Error "<where>: ..." on odd length or a non-hex digit.
std::vector<uint8_t> from_hex(std::string_view hex, const std::string& where);

}  // namespace tupe::checkpoint
