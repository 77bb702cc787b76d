// `tupe analyze --glue NAME=DIR ...`: the GLUE average against pre-training steps (the paper's
// Figure 5c: Ke, He and Liu, ICLR 2021), from `tupe finetune` outputs.
//
// Each DIR is a fine-tuning output folder (its results.json, format tupe-glue-results); it
// names the checkpoint's step (pretrain_steps) and one or more tasks, each with its reported
// primary dev metric (the median over seeds at the best LR). For every NAME and step the
// average is the mean over the tasks found there, x100; a point whose task set differs from
// the NAME's largest is kept but flagged (an average over fewer tasks).
//
// Written under OUT:
//   glue_curve.json   per NAME: points [{step, average, tasks: {TASK: score x100}}], steps ascending
//   glue_curve.md     the table: NAME, step, the average, the tasks
//   glue_plots.py     the built-in script that drew glue_curve.png (unless --script names another)
//   glue_curve.png    the average against the step, one line per NAME
#pragma once
#include <filesystem>
#include <string>
#include <vector>

#include "tools/analyze/compare.h"

namespace tupe::analyze {

struct GlueCurveOptions {
  std::vector<CompareRun> results;  ///< NAME=DIR, DIR holding results.json; at least one
  std::filesystem::path output;     ///< folder (created; files of the same names replaced)
  std::string python;               ///< Python with matplotlib ("" = $TUPE_PYTHON, else the configured one)
  std::string script;               ///< plotting script ("" = the built-in glue_plots.py)
};

/// Reads every results.json, writes the files above and draws. Returns glue_curve.md's text.
/// Throws ONE-line tupe::Error naming the file and the cause (missing, not JSON, not a
/// tupe-glue-results file, a task without its reported score, the same task twice at one
/// step of one NAME) or the failing script. Nothing is written when a file cannot be read.
std::string glue_curve(const GlueCurveOptions& options);

}  // namespace tupe::analyze
