// Where a test executable finds the checkout, its build and the shared data when the test
// environment does not say (running a test by hand): relative to the executable's own folder.
// tupe_test_paths(target) (cmake/TupeTesting.cmake) compiles in the relative paths, never
// absolute ones, so that the compile command is the same in every checkout and ccache
// serves a second checkout from the first one's cache.
#pragma once
#include <filesystem>
#include <string>

#ifndef TUPE_TEST_TO_SOURCE
#error "tests/support/test_paths.h: the target needs tupe_test_paths() (cmake/TupeTesting.cmake)"
#endif

namespace tupe::testing {

/// The folder of the running executable.
inline std::filesystem::path executable_dir() { return std::filesystem::read_symlink("/proc/self/exe").parent_path(); }

/// `relative` (e.g. "tests/data") under the checkout this executable was built from.
inline std::string source_path(const std::string& relative = "") {
  return (executable_dir() / TUPE_TEST_TO_SOURCE / relative).lexically_normal().string();
}

/// `relative` (e.g. "cli/tupe") under the build folder of this executable.
inline std::string build_path(const std::string& relative = "") {
  return (executable_dir() / TUPE_TEST_TO_BUILD / relative).lexically_normal().string();
}

/// The shared data folder CMake was configured with (TUPE_SHARED_DATA, ../shared/data).
inline std::string configured_shared_data() {
  return (executable_dir() / TUPE_TEST_TO_SHARED).lexically_normal().string();
}

}  // namespace tupe::testing
