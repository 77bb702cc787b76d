// What a run's log windows say about their own time (the metrics records of
// trainer/pretrain, docs/formats.md "Metrics"), averaged over the windows: `tupe analyze
// --run` prints them beside the validation table (compare.h).
#pragma once
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace tupe::analyze {

/// Means over a run's log windows (the records with "step_time_s"), each weighted alike;
/// nullopt where no window has the figure (an older run; host syncs on a CPU run).
struct WindowFigures {
  int64_t windows = 0;                              ///< log records read
  std::optional<double> step_time_s;                ///< seconds per optimizer step
  std::optional<double> data_wait_fraction;         ///< share of the window waiting for batches, [0, 1]
  std::optional<double> exposed_allreduce_ms;       ///< exposed gradient sync per step (ms)
  std::optional<double> exposed_allreduce_fraction; ///< its share of the window, [0, 1]
  std::optional<double> host_syncs_per_step;        ///< CUDA runs only; expected 0
};

/// Reads a metrics JSONL. Throws "<path>:<line>: ..." on a bad line (as metrics_jsonl_to_csv)
/// or a figure that is not a number.
WindowFigures window_figures(const std::filesystem::path& metrics_jsonl);

/// One Markdown table row "| name | windows | step time | data wait | exposed all-reduce |
/// host syncs |" ("-" for a missing figure). window_figures_header() is its header.
std::string window_figures_row(const std::string& name, const WindowFigures& f);
std::string window_figures_header();

/// {"windows": n, "step_time_s": x, ...}: the figures by their metrics names, null when missing.
nlohmann::json window_figures_json(const WindowFigures& f);

}  // namespace tupe::analyze
