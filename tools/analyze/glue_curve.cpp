#include "tools/analyze/glue_curve.h"

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "checkpoint/durable_io.h"
#include "common/error.h"
#include "tools/analyze/plot_script.h"
#include "tools/analyze/glue_plots_source.h"

namespace tupe::analyze {

namespace fs = std::filesystem;

namespace {

/// One results.json: its checkpoint step and (task, primary score x100) pairs.
struct GlueResult {
  int64_t step = 0;
  std::vector<std::pair<std::string, double>> scores;
};

GlueResult read_results(const fs::path& dir) {
  const fs::path file = fs::is_directory(dir) ? dir / "results.json" : dir;
  std::ifstream in(file);
  TUPE_CHECK(in, file.string() << ": cannot read (give a `tupe finetune` output folder)");
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    TUPE_CHECK(false, file.string() << ": not JSON: " << e.what());
  }
  TUPE_CHECK(doc.is_object() && doc.value("format", "") == "tupe-glue-results",
             file.string() << ": not a tupe-glue-results file (format)");
  GlueResult r;
  TUPE_CHECK(doc.contains("pretrain_steps") && doc["pretrain_steps"].is_number_integer(),
             file.string() << ": pretrain_steps missing");
  r.step = doc["pretrain_steps"].get<int64_t>();
  for (const auto& t : doc.value("tasks", nlohmann::json::array())) {
    const std::string task = t.value("task", "");
    const double best = t.value("best_lr", 0.0);
    bool found = false;
    for (const auto& s : t.value("by_lr", nlohmann::json::array()))
      if (s.value("lr", -1.0) == best && s.contains("median_score")) {
        r.scores.emplace_back(task, 100.0 * s["median_score"].get<double>());
        found = true;
      }
    TUPE_CHECK(found, file.string() << ": task " << task << " has no reported score (by_lr at best_lr)");
  }
  TUPE_CHECK(!r.scores.empty(), file.string() << ": no task");
  return r;
}

std::string fixed(double v, int digits) {
  std::ostringstream os;
  os.setf(std::ios::fixed);
  os.precision(digits);
  os << v;
  return os.str();
}

}  // namespace

std::string glue_curve(const GlueCurveOptions& options) {
  TUPE_CHECK(!options.results.empty(), "analyze --glue: no NAME=DIR given");
  TUPE_CHECK(!options.output.empty(), "analyze --glue: no output folder given (--output DIR)");
  // NAME -> step -> task -> score; names in the order first given.
  std::vector<std::string> names;
  std::map<std::string, std::map<int64_t, std::map<std::string, double>>> points;
  for (const CompareRun& run : options.results) {
    const GlueResult r = read_results(run.path);
    if (!points.count(run.name)) names.push_back(run.name);
    auto& at = points[run.name][r.step];
    for (const auto& [task, score] : r.scores) {
      TUPE_CHECK(!at.count(task), run.path.string() << ": " << task << " at step " << r.step << " of " << run.name
                                                    << " is given twice");
      at[task] = score;
    }
  }
  std::ostringstream md;
  md << "| model | pre-training step | GLUE average | tasks |\n|---|---|---|---|\n";
  nlohmann::json models = nlohmann::json::array();
  for (const std::string& name : names) {
    size_t most = 0;
    for (const auto& [step, tasks] : points[name]) most = std::max(most, tasks.size());
    nlohmann::json jpoints = nlohmann::json::array();
    for (const auto& [step, tasks] : points[name]) {
      double sum = 0;
      std::string listed;
      for (const auto& [task, score] : tasks) {
        sum += score;
        listed += (listed.empty() ? "" : ", ") + task + " " + fixed(score, 1);
      }
      const double average = sum / static_cast<double>(tasks.size());
      const bool partial = tasks.size() < most;
      md << "| " << name << " | " << step << " | " << fixed(average, 2) << (partial ? " (fewer tasks)" : "") << " | "
         << listed << " |\n";
      jpoints.push_back({{"step", step}, {"average", average}, {"tasks", tasks}, {"partial", partial}});
    }
    models.push_back({{"name", name}, {"points", jpoints}});
  }
  md << "\nGLUE average: the mean over the tasks of each point of their reported dev metric x100 (CoLA Matthews "
        "corr., STS-B Pearson, others accuracy; the median over seeds at the best LR).\n";
  fs::create_directories(options.output);
  checkpoint::write_file_atomic(options.output / "glue_curve.json", nlohmann::json{{"models", models}}.dump(2) + "\n");
  checkpoint::write_file_atomic(options.output / "glue_curve.md", md.str());
  fs::remove(options.output / "glue_curve.png");
  const std::string script =
      run_plot_script(plotting_python(options.python), options.script, "glue_plots.py", kGluePlotsPy, options.output);
  TUPE_CHECK(fs::exists(options.output / "glue_curve.png"),
             script << ": did not write " << (options.output / "glue_curve.png").string());
  return md.str();
}

}  // namespace tupe::analyze
