// Helpers of the common/ tests: a scratch folder under the system's temp folder and the
// Python that runs the reference implementations written in the tests.
#pragma once
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>

#include "common/error.h"

namespace tupe::common_test {

/// A fresh folder, removed with its contents when the object goes.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& name)
      : path_(std::filesystem::temp_directory_path() / ("tupe-common-" + name + "-" + std::to_string(::getpid()))) {
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  std::string file(const std::string& name) const { return (path_ / name).string(); }
  /// Writes `bytes` to file `name` (binary) and returns its path.
  std::string write(const std::string& name, const std::string& bytes) const {
    std::ofstream out(file(name), std::ios::binary);
    out << bytes;
    if (!out) throw std::runtime_error("cannot write " + file(name));
    return file(name);
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

/// $TUPE_PYTHON (CTest sets it), else python3 from PATH.
inline std::string python() {
  const char* p = std::getenv("TUPE_PYTHON");
  return p != nullptr && *p ? p : "python3";
}

/// Runs `script` with python() and returns its stdout; throws when it exits non-zero.
inline std::string run_python(const std::string& script, const ScratchDir& dir) {
  const std::string path = dir.write("script.py", script);
  std::unique_ptr<FILE, int (*)(FILE*)> p(popen(("'" + python() + "' '" + path + "'").c_str(), "r"), &pclose);
  if (!p) throw std::runtime_error("cannot run " + python());
  std::string out;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof(buf), p.get())) > 0;) out.append(buf, n);
  if (pclose(p.release()) != 0) throw std::runtime_error(python() + " " + path + " failed; output: " + out);
  return out;
}

/// The message of the tupe::Error `f` throws ("" when it throws none).
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace tupe::common_test
