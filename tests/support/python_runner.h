// Running a reference Python script from a C++ test: $TUPE_PYTHON (set by CTest) or the
// Python configured at build time. A missing Python or library makes the script fail, and
// so the test (never a skip).
#pragma once
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace tupe::testing {

/// $TUPE_PYTHON when set, else `configured`.
inline std::string python_executable(const char* configured) {
  const char* env = std::getenv("TUPE_PYTHON");
  return env && *env ? env : configured;
}

/// Runs `<python> <dir>/<script> <args>`; returns the exit status (-1 when it did not run
/// or was killed) and puts stdout+stderr into *output.
inline int run_python_script(const std::string& python, const std::string& dir, const std::string& script,
                             const std::string& args, std::string* output) {
  const std::string command = "'" + python + "' '" + dir + "/" + script + "' " + args + " 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  if (!pipe) return -1;
  std::array<char, 4096> buf{};
  output->clear();
  size_t n = 0;
  while ((n = std::fread(buf.data(), 1, buf.size(), pipe)) > 0) output->append(buf.data(), n);
  const int status = ::pclose(pipe);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace tupe::testing
