// Helpers of the data_pipeline tests: paths from the test environment, temporary folders,
// running commands, and checking error messages.
#pragma once
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <string>

#include "common/error.h"
#include "tests/support/test_paths.h"

namespace tupe::data_pipeline::test {

/// $TUPE_SHARED_DATA, else the folder CMake was configured with (../shared/data).
inline std::string shared_data() {
  if (const char* d = std::getenv("TUPE_SHARED_DATA")) return d;
  return ::tupe::testing::configured_shared_data();
}

inline std::string vocab_path() { return shared_data() + "/vocab/bert-base-uncased-vocab.txt"; }
inline std::string wikitext_test_path() { return shared_data() + "/text/wikitext-2/wiki.test.raw"; }

/// $TUPE_PYTHON, else the configured TUPE_PYTHON (the venv with h5py and numpy); the tests
/// that need it fail without it.
inline std::string python() {
  const char* p = std::getenv("TUPE_PYTHON");
  return p ? p : TUPE_DATA_TEST_PYTHON;
}

/// $TUPE_BIN, else the `tupe` executable of this build.
inline std::string tupe_bin() {
  const char* b = std::getenv("TUPE_BIN");
  return b ? b : ::tupe::testing::build_path("cli/tupe");
}

/// Folder of this test's sources.
inline std::string test_source_dir() { return ::tupe::testing::source_path("tests/data"); }

/// A fresh folder removed on destruction.
class TempDir {
 public:
  explicit TempDir(const std::string& name) {
    path_ = std::filesystem::temp_directory_path() /
            ("tupe-data-" + name + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter()++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string str() const { return path_.string(); }
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }

 private:
  static int& counter() {
    static int c = 0;
    return c;
  }
  std::filesystem::path path_;
};

inline void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out << bytes;
}

/// Runs a shell command; returns its exit status and combined stdout + stderr.
struct CommandResult {
  int status = -1;
  std::string output;
};
inline CommandResult run_command(const std::string& command) {
  CommandResult r;
  FILE* p = ::popen((command + " 2>&1").c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
  const int st = ::pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

/// `tupe preprocess --quiet --tokenizer.vocab <BERT's vocab> ARGS`.
inline CommandResult run_preprocess_quietly(const std::string& args) {
  return run_command(tupe_bin() + " preprocess --quiet --tokenizer.vocab " + vocab_path() + " " + args);
}

/// The failed run's one error line (the line holding "error:"): fails the test when `output`
/// holds none or several.
inline std::string one_error_line(const std::string& output) {
  size_t lines = 0;
  std::string last;
  for (size_t pos = 0; (pos = output.find("error:", pos)) != std::string::npos; ++pos) {
    ++lines;
    const size_t b = output.rfind('\n', pos), e = output.find('\n', pos);
    last = output.substr(b == std::string::npos ? 0 : b + 1, e - (b == std::string::npos ? 0 : b + 1));
  }
  EXPECT_EQ(lines, 1u) << output;
  return last;
}

/// Runs `f`, which must throw tupe::Error whose one-line message contains every fragment.
inline void expect_error(const std::function<void()>& f, std::initializer_list<std::string> fragments) {
  try {
    f();
    ADD_FAILURE() << "expected a tupe::Error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.find('\n'), std::string::npos) << "not one line: " << msg;
    for (const auto& frag : fragments) EXPECT_NE(msg.find(frag), std::string::npos) << "'" << frag << "' not in: " << msg;
  }
}

}  // namespace tupe::data_pipeline::test
