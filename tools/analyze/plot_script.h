// What `tupe analyze` and `tupe analyze --run` share: reading metrics JSONL records and running
// a plotting script with Python.
#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace tupe::analyze {

/// Calls fn(record, line number) for every non-blank line of a metrics JSONL, each a JSON
/// object with an integer "step". Throws "<path>: cannot read the metrics file" or
/// "<path>:<line>: not JSON: ... / not a JSON object / \"step\" missing or not an integer".
void for_each_metrics_record(const std::filesystem::path& path,
                             const std::function<void(const nlohmann::json&, int64_t)>& fn);

/// The Python that draws: `configured`, else $TUPE_PYTHON, else the build's configured one.
std::string plotting_python(const std::string& configured);

/// Writes `builtin_text` to OUT/<builtin_name> when `script` is empty (the folder then records
/// what drew its plots), and runs `python script OUT`. Returns the script's path. Throws
/// tupe::Error when the script is missing, Python cannot start or the script fails.
std::string run_plot_script(const std::string& python, std::string script, const char* builtin_name,
                            const char* builtin_text, const std::filesystem::path& out);

}  // namespace tupe::analyze
