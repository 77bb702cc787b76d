// `tupe analyze --run NAME=DIR ...`: several pre-training runs' validation curves side by side.
//
// Runs with the same NAME are seeds of one model: their curves are averaged over the steps
// that every seed evaluated, with the min..max band. The reference model (--reference, default
// the first NAME given) sets the target: the mean of its seeds' final validation losses. Each
// run's "steps to reach" is the first step where its validation curve is at or below the
// target, interpolated linearly between the two evaluations around the crossing (empty when it
// never gets there): the paper's "TUPE reaches BERT-A's quality in about 30% of the steps"
// (Ke, He and Liu, ICLR 2021, Figure 5).
//
// Written under OUT:
//   compare.csv     name,run,step,validation_loss (every evaluation of every run; for a step
//                   evaluated twice, e.g. around a resume, the last record)
//   compare.md      the table: per model, seeds, final step, final validation loss (mean and
//                   min..max), steps to reach the target (mean over seeds that reach it), and
//                   that as a share of the reference's final step -- shown only while the
//                   reference is still descending (its mean loss fell by >= 5% over the second
//                   half of its steps: a target on a plateau says little), and never for the
//                   reference itself; then measures that do not depend on where the reference
//                   stops: each model's mean loss at 10%, 30%, 50% and 100% of the reference's
//                   final step (linear between evaluations; "-" outside its curve), and the
//                   steps to each of --losses (issue 51)
//   compare.json    the same numbers, plus per run
//   compare_plots.py the built-in script that drew validation.png (unless --script names another)
//   validation.png  every model's mean validation curve with its seed band and the target
#pragma once
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace tupe::analyze {

/// One run: a model name and its metrics (a checkpoint.dir holding metrics/rank_0.jsonl, or
/// the metrics JSONL itself).
struct CompareRun {
  std::string name;
  std::filesystem::path path;
};

struct CompareOptions {
  std::vector<CompareRun> runs;   ///< at least one; runs of one name are its seeds
  std::filesystem::path output;   ///< folder (created; files of the same names replaced)
  std::string reference;          ///< model whose final loss is the target ("" = the first name)
  std::string python;             ///< Python with matplotlib ("" = $TUPE_PYTHON, else the configured one)
  std::string script;             ///< plotting script ("" = the built-in compare_plots.py)
  std::vector<double> losses;     ///< fixed validation losses whose steps are tabled (nats; may be empty)
};


/// "NAME=PATH" -> CompareRun. Throws tupe::Error("--run '...': expected NAME=PATH ...") when
/// either side is empty.
CompareRun parse_compare_run(const std::string& text);

/// (step, validation loss) points of a curve, steps ascending.
using Curve = std::vector<std::pair<int64_t, double>>;

/// The validation curve of a metrics JSONL: records with "validation_loss", the last one per
/// step. Throws "<path>:<line>: ..." on a bad line (as metrics_jsonl_to_csv).
Curve validation_curve(const std::filesystem::path& metrics_jsonl);

/// First step at which `curve` is <= target, linear between evaluations: for consecutive
/// points (s0, v0) > target >= (s1, v1) it is s0 + (v0 - target) / (v0 - v1) * (s1 - s0); the
/// first point itself when it is already <= target. nullopt when no point reaches it.
std::optional<double> steps_to_reach(const Curve& curve, double target);

/// The fraction of its loss a curve shed over its second half, (v(S/2) - v(S)) / v(S/2) with S
/// its last step and v linear between evaluations; a reference below 0.05 is on a plateau.
double second_half_drop(const Curve& curve);

/// The curve's value at `step`, linear between evaluations; nullopt outside [first, last] step.
std::optional<double> value_at(const Curve& curve, double step);

/// Reads every run, writes the files above and runs the plotting script. Returns compare.md's
/// text. Throws ONE-line tupe::Error naming the run (its file, the line) and the cause: no
/// metrics file, a run without validation records, an unknown --reference, a failing script.
/// Nothing is written when a run cannot be read.
std::string compare_runs(const CompareOptions& options);

}  // namespace tupe::analyze
