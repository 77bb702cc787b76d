#include "tools/analyze/plot_script.h"

#include <spawn.h>
#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "checkpoint/durable_io.h"
#include "common/error.h"

extern char** environ;

namespace tupe::analyze {
namespace fs = std::filesystem;

namespace {

/// Runs argv (argv[0] looked up in PATH); returns the exit status (-1 when it could not start).
int run_process(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = 0;
  if (posix_spawnp(&pid, argv[0], nullptr, nullptr, argv.data(), environ) != 0) return -1;
  int status = 0;
  if (waitpid(pid, &status, 0) < 0) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

void for_each_metrics_record(const fs::path& path, const std::function<void(const nlohmann::json&, int64_t)>& fn) {
  std::ifstream in(path);
  TUPE_CHECK(in, path.string() << ": cannot read the metrics file");
  std::string line;
  int64_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const std::exception& e) {
      TUPE_FAIL(path.string() << ":" << line_no << ": not JSON: " << e.what());
    }
    TUPE_CHECK(j.is_object(), path.string() << ":" << line_no << ": not a JSON object");
    TUPE_CHECK(j.contains("step") && j["step"].is_number_integer(),
               path.string() << ":" << line_no << ": \"step\" missing or not an integer");
    fn(j, line_no);
  }
}

std::string plotting_python(const std::string& configured) {
  if (!configured.empty()) return configured;
  const char* env = std::getenv("TUPE_PYTHON");
  return (env && *env) ? env : TUPE_DEFAULT_PYTHON;
}

std::string run_plot_script(const std::string& python, std::string script, const char* builtin_name,
                            const char* builtin_text, const fs::path& out) {
  if (script.empty()) {
    script = (out / builtin_name).string();
    checkpoint::write_file_atomic(script, builtin_text);
  }
  TUPE_CHECK(fs::is_regular_file(script), "--script " << script << ": no such file");
  const int status = run_process({python, script, out.string()});
  TUPE_CHECK(status != -1, python << ": cannot start the analysis script " << script);
  TUPE_CHECK(status == 0,
             script << ": failed with exit status " << status << " (" << python << "; output " << out.string() << ")");
  return script;
}

}  // namespace tupe::analyze
