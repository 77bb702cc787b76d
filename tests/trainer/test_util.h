// Helpers for the trainer tests: a self-deleting temporary folder, running the reference
// Python scripts of this folder with $TUPE_PYTHON, and float comparisons.
#pragma once
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <ATen/ATen.h>

#include <array>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>

#include "tests/support/python_runner.h"
#include "tests/support/test_paths.h"

namespace tupe::trainer::testing {

/// mkdtemp folder removed (recursively) on destruction.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "tupe-trainer-test-XXXXXX").string();
    if (!::mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};
/// The Python with the reference libraries: $TUPE_PYTHON, else the configured one.
inline std::string python() { return ::tupe::testing::python_executable(TUPE_CONFIGURED_PYTHON); }

/// Runs `$TUPE_PYTHON <this test folder>/<script> <args>` (tests/support/python_runner.h).
inline int run_python(const std::string& script, const std::string& args, std::string* output) {
  return ::tupe::testing::run_python_script(python(), ::tupe::testing::source_path("tests/trainer"), script, args,
                                            output);
}

/// Max over elements of |a - b| / (|b| + abs_floor), in float64.
inline double max_rel_diff(const at::Tensor& a, const at::Tensor& b, double abs_floor) {
  const at::Tensor ad = a.to(at::kDouble), bd = b.to(at::kDouble);
  return ((ad - bd).abs() / (bd.abs() + abs_floor)).max().item<double>();
}

/// Bitwise equality of two tensors (same dtype, shape and bytes).
inline bool bitwise_equal(const at::Tensor& a, const at::Tensor& b) {
  if (a.scalar_type() != b.scalar_type() || a.sizes() != b.sizes()) return false;
  if (a.numel() == 0) return true;  // an empty tensor's data pointer may be null (memcmp's is not)
  const at::Tensor ac = a.contiguous().cpu(), bc = b.contiguous().cpu();
  return std::memcmp(ac.data_ptr(), bc.data_ptr(), ac.numel() * ac.element_size()) == 0;
}

}  // namespace tupe::trainer::testing
