// Helpers for the checkpoint tests: the trainer tests' temporary folder and comparisons
// (tests/trainer/test_util.h), and the reference Python scripts of this folder.
#pragma once
#include "tests/trainer/test_util.h"

namespace tupe::checkpoint::testing {

using trainer::testing::bitwise_equal;
using trainer::testing::max_rel_diff;
using trainer::testing::TempDir;

/// Runs `$TUPE_PYTHON <tests/checkpoint>/<script> <args>` (tests/support/python_runner.h).
inline int run_python(const std::string& script, const std::string& args, std::string* output) {
  return ::tupe::testing::run_python_script(trainer::testing::python(), ::tupe::testing::source_path("tests/checkpoint"),
                                            script, args, output);
}

}  // namespace tupe::checkpoint::testing
