#include "tools/analyze/compare.h"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <map>
#include <numeric>
#include <sstream>

#include <nlohmann/json.hpp>

#include "checkpoint/durable_io.h"
#include "common/error.h"
#include "tools/analyze/compare_plots_source.h"
#include "tools/analyze/plot_script.h"
#include "tools/analyze/window_figures.h"

namespace tupe::analyze {
namespace fs = std::filesystem;

namespace {

/// A run as read: where its metrics came from, its curve and where it reaches the target.
struct RunCurve {
  fs::path metrics;
  Curve curve;
  WindowFigures windows;  ///< what its log windows say about their time
  std::optional<double> reach;
};

/// One model: its seeds in the order given.
struct Model {
  std::string name;
  std::vector<RunCurve> runs;
};

/// The metrics JSONL of a run path: the file itself, DIR/metrics/rank_0.jsonl (a
/// checkpoint.dir) or DIR/rank_0.jsonl (a metrics folder).
fs::path metrics_file(const CompareRun& run) {
  if (!fs::is_directory(run.path)) {
    TUPE_CHECK(fs::is_regular_file(run.path), "--run " << run.name << "=" << run.path.string() << ": no such file or folder");
    return run.path;
  }
  for (const fs::path& p : {run.path / "metrics" / "rank_0.jsonl", run.path / "rank_0.jsonl"})
    if (fs::is_regular_file(p)) return p;
  TUPE_FAIL("--run " << run.name << "=" << run.path.string()
                     << ": no metrics/rank_0.jsonl in this folder (give a checkpoint.dir or a metrics JSONL)");
  return {};
}

double mean(const std::vector<double>& v) { return std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size()); }

/// The model's mean curve over the steps every seed evaluated: rows [step, mean, min, max].
nlohmann::json mean_curve(const Model& m) {
  std::map<int64_t, std::vector<double>> at_step;
  for (const auto& r : m.runs)
    for (const auto& [s, v] : r.curve) at_step[s].push_back(v);
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& [s, vs] : at_step) {
    if (vs.size() != m.runs.size()) continue;
    rows.push_back({s, mean(vs), *std::min_element(vs.begin(), vs.end()), *std::max_element(vs.begin(), vs.end())});
  }
  return rows;
}

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

/// "a" when lo == hi, else "lo..hi".
std::string span(double lo, double hi, int digits) {
  return lo == hi ? fixed(lo, digits) : fixed(lo, digits) + ".." + fixed(hi, digits);
}

}  // namespace

CompareRun parse_compare_run(const std::string& text) {
  const auto eq = text.find('=');
  TUPE_CHECK(eq != std::string::npos && eq > 0 && eq + 1 < text.size(),
             "--run '" << text << "': expected NAME=PATH (a model name, then its checkpoint.dir or metrics JSONL)");
  return {text.substr(0, eq), text.substr(eq + 1)};
}

Curve validation_curve(const fs::path& metrics_jsonl) {
  std::map<int64_t, double> points;  // the last record per step wins (a resumed run repeats steps)
  for_each_metrics_record(metrics_jsonl, [&](const nlohmann::json& j, int64_t line_no) {
    if (!j.contains("validation_loss") || j["validation_loss"].is_null()) return;
    TUPE_CHECK(j["validation_loss"].is_number(),
               metrics_jsonl.string() << ":" << line_no << ": \"validation_loss\" is not a number");
    points[j["step"].get<int64_t>()] = j["validation_loss"].get<double>();
  });
  return {points.begin(), points.end()};
}

std::optional<double> steps_to_reach(const Curve& curve, double target) {
  for (size_t i = 0; i < curve.size(); ++i) {
    const auto [s1, v1] = curve[i];
    if (v1 > target) continue;
    if (i == 0) return static_cast<double>(s1);
    const auto [s0, v0] = curve[i - 1];
    return static_cast<double>(s0) + (v0 - target) / (v0 - v1) * static_cast<double>(s1 - s0);
  }
  return std::nullopt;
}

std::string compare_runs(const CompareOptions& options) {
  TUPE_CHECK(!options.runs.empty(), "analyze: no run given (--run NAME=DIR, once per run)");
  TUPE_CHECK(!options.output.empty(), "--output: missing");
  // ---- Read every run before anything is written.
  std::vector<Model> models;
  for (const auto& run : options.runs) {
    RunCurve rc;
    rc.metrics = metrics_file(run);
    rc.curve = validation_curve(rc.metrics);
    rc.windows = window_figures(rc.metrics);
    TUPE_CHECK(!rc.curve.empty(), rc.metrics.string() << ": no \"validation_loss\" record (run " << run.name
                                                      << "; was validation data given to the run?)");
    auto it = std::find_if(models.begin(), models.end(), [&](const Model& m) { return m.name == run.name; });
    if (it == models.end()) it = models.insert(models.end(), Model{run.name, {}});
    it->runs.push_back(std::move(rc));
  }
  const std::string reference = options.reference.empty() ? models.front().name : options.reference;
  const auto ref = std::find_if(models.begin(), models.end(), [&](const Model& m) { return m.name == reference; });
  TUPE_CHECK(ref != models.end(), "--reference " << reference << ": not one of the --run names");
  std::vector<double> ref_final, ref_steps;
  for (const auto& r : ref->runs) {
    ref_final.push_back(r.curve.back().second);
    ref_steps.push_back(static_cast<double>(r.curve.back().first));
  }
  const double target = mean(ref_final), ref_final_step = mean(ref_steps);

  // ---- Numbers.
  nlohmann::json jmodels = nlohmann::json::array();
  std::ostringstream csv, md;
  csv.precision(9);
  csv << "name,run,step,validation_loss\n";
  md << "| model | seeds | final step | final validation loss (mean) | seed min..max | steps to reach "
     << fixed(target, 4) << " | share of " << reference << "'s steps |\n|---|---|---|---|---|---|---|\n";
  for (auto& m : models) {
    std::vector<double> finals, final_steps, reaches;
    nlohmann::json jruns = nlohmann::json::array();
    for (auto& r : m.runs) {
      r.reach = steps_to_reach(r.curve, target);
      finals.push_back(r.curve.back().second);
      final_steps.push_back(static_cast<double>(r.curve.back().first));
      if (r.reach) reaches.push_back(*r.reach);
      for (const auto& [s, v] : r.curve) csv << m.name << "," << r.metrics.string() << "," << s << "," << v << "\n";
      jruns.push_back({{"metrics", r.metrics.string()},
                       {"final_step", r.curve.back().first},
                       {"final_validation_loss", r.curve.back().second},
                       {"steps_to_reach", r.reach ? nlohmann::json(*r.reach) : nlohmann::json(nullptr)},
                       {"window_figures", window_figures_json(r.windows)}});
    }
    const double lo = *std::min_element(finals.begin(), finals.end()), hi = *std::max_element(finals.begin(), finals.end());
    const double s_lo = *std::min_element(final_steps.begin(), final_steps.end());
    const double s_hi = *std::max_element(final_steps.begin(), final_steps.end());
    const bool all_reach = reaches.size() == m.runs.size();
    std::string reach_text = "not reached", share_text = "-";
    if (!reaches.empty()) {
      reach_text = fixed(mean(reaches), 0);
      share_text = fixed(100.0 * mean(reaches) / ref_final_step, 0) + "%";
      if (!all_reach) reach_text += " (" + std::to_string(reaches.size()) + " of " + std::to_string(m.runs.size()) + " seeds)";
    }
    md << "| " << m.name << " | " << m.runs.size() << " | " << span(s_lo, s_hi, 0) << " | " << fixed(mean(finals), 4)
       << " | " << span(lo, hi, 4) << " | " << reach_text << " | " << share_text << " |\n";
    jmodels.push_back({{"name", m.name},
                       {"seeds", m.runs.size()},
                       {"final_validation_loss", {{"mean", mean(finals)}, {"min", lo}, {"max", hi}}},
                       {"steps_to_reach", reaches.empty() ? nlohmann::json(nullptr) : nlohmann::json(mean(reaches))},
                       {"seeds_reaching", reaches.size()},
                       {"curve", mean_curve(m)},
                       {"runs", jruns}});
  }
  md << "\nTarget: " << reference << "'s final validation loss " << fixed(target, 4) << " (mean of " << ref->runs.size()
     << " seed" << (ref->runs.size() == 1 ? "" : "s") << ", at step " << fixed(ref_final_step, 0)
     << "); steps to reach it are interpolated linearly between evaluations.\n";
  md << "\nWhere the step time went (means over each run's log windows, rank 0; docs/profiling.md):\n\n"
     << window_figures_header();
  for (const auto& m : models)
    for (size_t i = 0; i < m.runs.size(); ++i)
      md << window_figures_row(m.runs.size() == 1 ? m.name : m.name + " #" + std::to_string(i + 1), m.runs[i].windows);
  const nlohmann::json info = {{"reference", reference}, {"target", target}, {"reference_final_step", ref_final_step},
                               {"models", jmodels}};

  // ---- Files, then the figure.
  fs::create_directories(options.output);
  checkpoint::write_file_atomic(options.output / "compare.csv", csv.str());
  checkpoint::write_file_atomic(options.output / "compare.json", info.dump(2) + "\n");
  checkpoint::write_file_atomic(options.output / "compare.md", md.str());
  fs::remove(options.output / "validation.png");
  const std::string script = run_plot_script(plotting_python(options.python), options.script, "compare_plots.py",
                                             kComparePlotsPy, options.output);
  TUPE_CHECK(fs::exists(options.output / "validation.png"),
             script << ": did not write " << (options.output / "validation.png").string());
  return md.str();
}

}  // namespace tupe::analyze
