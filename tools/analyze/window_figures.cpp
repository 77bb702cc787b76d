#include "tools/analyze/window_figures.h"

#include <cstdio>

#include "common/error.h"
#include "tools/analyze/plot_script.h"

namespace tupe::analyze {

namespace {

/// A running mean of one figure.
struct Mean {
  double sum = 0;
  int64_t n = 0;
  std::optional<double> value() const { return n > 0 ? std::optional<double>(sum / static_cast<double>(n)) : std::nullopt; }
};

std::string cell(const std::optional<double>& v, const char* format) {
  if (!v) return "-";
  char text[48];
  std::snprintf(text, sizeof text, format, *v);
  return text;
}

}  // namespace

WindowFigures window_figures(const std::filesystem::path& path) {
  Mean step_time, wait, exposed_ms, exposed_fraction, syncs;
  WindowFigures f;
  for_each_metrics_record(path, [&](const nlohmann::json& j, int64_t line_no) {
    if (!j.contains("step_time_s")) return;  // validation and start records
    ++f.windows;
    const auto add = [&](const char* key, Mean& m) {
      if (!j.contains(key)) return;
      TUPE_CHECK(j[key].is_number(), path.string() << ":" << line_no << ": \"" << key << "\" is not a number");
      m.sum += j[key].get<double>();
      ++m.n;
    };
    add("step_time_s", step_time);
    add("data_wait_fraction", wait);
    add("exposed_allreduce_ms", exposed_ms);
    add("exposed_allreduce_fraction", exposed_fraction);
    add("host_syncs_per_step", syncs);
  });
  f.step_time_s = step_time.value();
  f.data_wait_fraction = wait.value();
  f.exposed_allreduce_ms = exposed_ms.value();
  f.exposed_allreduce_fraction = exposed_fraction.value();
  f.host_syncs_per_step = syncs.value();
  return f;
}

std::string window_figures_header() {
  return "| run | log windows | step time (s) | data wait | exposed all-reduce (ms / step) | exposed all-reduce | "
         "host syncs / step |\n|---|---|---|---|---|---|---|\n";
}

std::string window_figures_row(const std::string& name, const WindowFigures& f) {
  const auto percent = [](const std::optional<double>& v) {
    return v ? std::optional<double>(100.0 * *v) : std::nullopt;
  };
  return "| " + name + " | " + std::to_string(f.windows) + " | " + cell(f.step_time_s, "%.3f") + " | " +
         cell(percent(f.data_wait_fraction), "%.1f%%") + " | " + cell(f.exposed_allreduce_ms, "%.2f") + " | " +
         cell(percent(f.exposed_allreduce_fraction), "%.1f%%") + " | " + cell(f.host_syncs_per_step, "%.2f") + " |\n";
}

nlohmann::json window_figures_json(const WindowFigures& f) {
  const auto value = [](const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); };
  return {{"windows", f.windows},
          {"step_time_s", value(f.step_time_s)},
          {"data_wait_fraction", value(f.data_wait_fraction)},
          {"exposed_allreduce_ms", value(f.exposed_allreduce_ms)},
          {"exposed_allreduce_fraction", value(f.exposed_allreduce_fraction)},
          {"host_syncs_per_step", value(f.host_syncs_per_step)}};
}

}  // namespace tupe::analyze
