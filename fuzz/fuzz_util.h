// Helpers shared by the libFuzzer harnesses in fuzz/: a per-process scratch folder under
// /dev/shm (the path-based parsers read real files), and writing one fuzz input to a file.
#pragma once
#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

namespace tupe_fuzz {

/// /dev/shm/tupe-fuzz-<name>-<pid>/ (created on first call, removed at a normal exit;
/// launch/fuzz.sh removes what a crashed process leaves).
inline const std::filesystem::path& scratch_dir(const char* name) {
  static std::filesystem::path dir;
  if (dir.empty()) {
    const std::filesystem::path base = std::filesystem::is_directory("/dev/shm") ? "/dev/shm" : "/tmp";
    dir = base / ("tupe-fuzz-" + std::string(name) + "-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
    });
  }
  return dir;
}

/// Replaces `path` with the `size` bytes at `data`; aborts on an I/O error (not a finding
/// of the parser, but the harness cannot go on).
inline void write_file(const std::filesystem::path& path, const void* data, size_t size) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    std::perror(path.c_str());
    std::abort();
  }
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd, p, size);
    if (n <= 0) {
      std::perror(path.c_str());
      std::abort();
    }
    p += n;
    size -= static_cast<size_t>(n);
  }
  ::close(fd);
}

/// With TUPE_FUZZ_VERBOSE=1 in the environment, prints the outcome of one input (the error
/// message a parser threw, or "accepted"): for triage and for checking the seeds.
inline void note(const char* outcome) {
  static const bool verbose = std::getenv("TUPE_FUZZ_VERBOSE") != nullptr;
  if (verbose) std::fprintf(stderr, "tupe fuzz: %s\n", outcome);
}

/// Prints `what` and aborts: a harness-level invariant failed (libFuzzer records the input).
[[noreturn]] inline void fail(const std::string& what) {
  std::fprintf(stderr, "tupe fuzz invariant failed: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace tupe_fuzz
