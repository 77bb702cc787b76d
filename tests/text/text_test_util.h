// Helpers of the tokenizer tests: the shared data folder, whole-file reads, line splitting,
// scratch folders.
#pragma once
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "tests/support/test_paths.h"

namespace tupe::text_test {

/// $TUPE_SHARED_DATA (set by CTest), else the folder CMake was configured with (../shared/data).
inline std::string shared_data() {
  if (const char* d = std::getenv("TUPE_SHARED_DATA"); d && *d) return d;
  return ::tupe::testing::configured_shared_data();
}

inline std::string uncased_vocab() { return shared_data() + "/vocab/bert-base-uncased-vocab.txt"; }
inline std::string cased_vocab() { return shared_data() + "/vocab/bert-base-cased-vocab.txt"; }

/// The file's bytes; a missing file fails the calling test (throws std::runtime_error).
inline std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// Splits on '\n' exactly as Python's str.split("\n") (a trailing newline gives a last empty line).
inline std::vector<std::string_view> split_lines(std::string_view s) {
  std::vector<std::string_view> lines;
  size_t start = 0;
  while (true) {
    const size_t end = s.find('\n', start);
    if (end == std::string_view::npos) {
      lines.push_back(s.substr(start));
      return lines;
    }
    lines.push_back(s.substr(start, end - start));
    start = end + 1;
  }
}

/// Space-separated integers.
inline std::vector<int32_t> parse_ids(std::string_view line) {
  std::vector<int32_t> ids;
  std::istringstream in{std::string(line)};
  int64_t v;
  while (in >> v) ids.push_back(static_cast<int32_t>(v));
  return ids;
}

/// A fresh folder under the system temp dir, removed when the object goes away.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& tag) {
    path_ = std::filesystem::temp_directory_path() /
            ("tupe_text_" + tag + "_" + std::to_string(::getpid()) + "_" + std::to_string(counter()++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  /// Writes `bytes` to `name` in the folder; returns the path.
  std::string write(const std::string& name, std::string_view bytes) const {
    std::ofstream out(file(name), std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    return file(name);
  }

 private:
  static int& counter() {
    static int n = 0;
    return n;
  }
  std::filesystem::path path_;
};

}  // namespace tupe::text_test
