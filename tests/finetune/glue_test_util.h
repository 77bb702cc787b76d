// Helpers of the GLUE tests: the shared data folder, scratch folders, small files, the
// reference Python ($TUPE_PYTHON) and the BERT uncased tokenizer.
#pragma once
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "tests/support/python_runner.h"
#include "tests/support/test_paths.h"

#include "data_pipeline/text/tokenizer_factory.h"

namespace tupe::finetune::testing {

/// $TUPE_SHARED_DATA (set by CTest), else ../shared/data next to the checkout.
inline std::string shared_data() {
  if (const char* d = std::getenv("TUPE_SHARED_DATA"); d && *d) return d;
  return ::tupe::testing::configured_shared_data();
}
inline std::string glue_dir() { return shared_data() + "/glue"; }
inline std::string uncased_vocab() { return shared_data() + "/vocab/bert-base-uncased-vocab.txt"; }

/// The WordPiece tokenizer of bert-base-uncased (lower-casing).
inline std::unique_ptr<data_pipeline::Tokenizer> uncased_tokenizer() {
  data_pipeline::TokenizerOptions o;
  o.vocab = uncased_vocab();
  return data_pipeline::make_tokenizer(o);
}

/// A fresh folder under the temp dir, removed (recursively) on destruction.
class ScratchDir {
 public:
  ScratchDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "tupe-glue-test-XXXXXX").string();
    if (!::mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~ScratchDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::string str() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

/// Writes `text` to `path` (creating parent folders).
inline void write_text(const std::filesystem::path& path, const std::string& text) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!out) throw std::runtime_error("cannot write " + path.string());
}

inline std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path.string());
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// The Python with the reference libraries: $TUPE_PYTHON, else the configured one.
inline std::string python() { return ::tupe::testing::python_executable(TUPE_GLUE_CONFIGURED_PYTHON); }

/// Runs `$TUPE_PYTHON <this test folder>/<script> <args>` (tests/support/python_runner.h).
inline int run_python(const std::string& script, const std::string& args, std::string* output) {
  return ::tupe::testing::run_python_script(python(), ::tupe::testing::source_path("tests/finetune"), script, args, output);
}

/// The message of the tupe::Error `f` throws ("" when it throws nothing).
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

}  // namespace tupe::finetune::testing
