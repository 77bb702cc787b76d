#include "tools/analyze/compare.h"

#include <algorithm>
#include <cmath>
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

std::optional<double> value_at(const Curve& curve, double step) {
  if (curve.empty() || step < static_cast<double>(curve.front().first) ||
      step > static_cast<double>(curve.back().first))
    return std::nullopt;
  for (size_t i = 1; i < curve.size(); ++i) {
    const auto [s1, v1] = curve[i];
    if (static_cast<double>(s1) < step) continue;
    const auto [s0, v0] = curve[i - 1];
    return v0 + (v1 - v0) * (step - static_cast<double>(s0)) / static_cast<double>(s1 - s0);
  }
  return curve.back().second;
}

double second_half_drop(const Curve& curve) {
  const auto half = value_at(curve, static_cast<double>(curve.back().first) / 2);
  const double start = half ? *half : curve.front().second;  // evaluated only late: from its first point
  return (start - curve.back().second) / start;
}

namespace {
/// A model's mean curve as a Curve (steps every seed evaluated).
Curve mean_points(const nlohmann::json& rows) {
  Curve c;
  for (const auto& r : rows) c.emplace_back(r[0].get<int64_t>(), r[1].get<double>());
  return c;
}
}  // namespace

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
  for (const double l : options.losses)
    TUPE_CHECK(l > 0 && std::isfinite(l), "--losses: " << l << " is not a positive loss");
  const double reference_drop = second_half_drop(mean_points(mean_curve(*ref)));
  const bool descending = reference_drop >= 0.05;

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
    if (m.name == reference) {
      reach_text = "(the reference)";
    } else if (!descending) {
      reach_text = "(the reference is on a plateau)";
    } else if (!reaches.empty()) {
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
     << "); steps to reach it are interpolated linearly between evaluations, and shown only while the reference "
        "is still descending: its mean loss fell by "
     << fixed(100 * reference_drop, 1) << "% over the second half of its steps ("
     << (descending ? "at least" : "under") << " 5%).\n";
  // Measures that do not depend on where the reference stops.
  const double fractions[] = {0.1, 0.3, 0.5, 1.0};
  md << "\nValidation loss at matched steps (share of " << reference << "'s final step " << fixed(ref_final_step, 0)
     << "; each model's mean curve, linear between evaluations):\n\n| model |";
  for (const double f : fractions) md << " " << fixed(100 * f, 0) << "% (step " << fixed(f * ref_final_step, 0) << ") |";
  md << "\n|---|";
  for (size_t i = 0; i < std::size(fractions); ++i) md << "---|";
  md << "\n";
  for (size_t i = 0; i < models.size(); ++i) {
    const Curve c = mean_points(jmodels[i]["curve"]);
    nlohmann::json at = nlohmann::json::object();
    md << "| " << models[i].name << " |";
    for (const double f : fractions) {
      const auto v = value_at(c, f * ref_final_step);
      md << " " << (v ? fixed(*v, 4) : "-") << " |";
      at[fixed(f, 1)] = v ? nlohmann::json(*v) : nlohmann::json(nullptr);
    }
    md << "\n";
    jmodels[i]["matched_steps"] = at;
  }
  if (!options.losses.empty()) {
    md << "\nSteps to fixed validation losses (mean over the seeds that reach it):\n\n| model |";
    for (const double l : options.losses) md << " " << fixed(l, 3) << " |";
    md << "\n|---|";
    for (size_t i = 0; i < options.losses.size(); ++i) md << "---|";
    md << "\n";
    for (size_t i = 0; i < models.size(); ++i) {
      nlohmann::json to = nlohmann::json::object();
      md << "| " << models[i].name << " |";
      for (const double l : options.losses) {
        std::vector<double> reach;
        for (const auto& r : models[i].runs)
          if (const auto s = steps_to_reach(r.curve, l)) reach.push_back(*s);
        std::string text = reach.empty() ? "not reached" : fixed(mean(reach), 0);
        if (!reach.empty() && reach.size() < models[i].runs.size())
          text += " (" + std::to_string(reach.size()) + " of " + std::to_string(models[i].runs.size()) + " seeds)";
        md << " " << text << " |";
        to[fixed(l, 3)] = reach.empty() ? nlohmann::json(nullptr) : nlohmann::json(mean(reach));
      }
      md << "\n";
      jmodels[i]["steps_to_losses"] = to;
    }
  }
  md << "\nWhere the step time went (means over each run's log windows, rank 0; docs/profiling.md):\n\n"
     << window_figures_header();
  for (const auto& m : models)
    for (size_t i = 0; i < m.runs.size(); ++i)
      md << window_figures_row(m.runs.size() == 1 ? m.name : m.name + " #" + std::to_string(i + 1), m.runs[i].windows);
  const nlohmann::json info = {{"reference", reference},       {"target", target},
                               {"reference_final_step", ref_final_step}, {"reference_second_half_drop", reference_drop},
                               {"reference_descending", descending}, {"models", jmodels}};

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
