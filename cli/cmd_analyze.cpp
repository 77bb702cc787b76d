// tupe analyze --checkpoint DIR --output OUT: heatmaps of the positional logit term per head
// (and, for BERT-A, the word-to-position / position-to-word terms TUPE removes), the
// position-embedding probes of Wang & Chen (2020) with a table, and the loss / learning-rate
// curves of the run's metrics JSONL. Outputs: tools/analyze/analysis.h.
#include <boost/program_options/options_description.hpp>
#include <boost/program_options/value_semantic.hpp>
#include <iostream>
#include <string>

#include "cli/commands.h"
#include "cli/config_cli.h"
#include "common/error.h"
#include "common/log.h"
#include "tools/analyze/analysis.h"

namespace po = boost::program_options;

namespace tupe::cli {

int run_analyze(int argc, char** argv) {
  std::string checkpoint, output, metrics, python, script;
  int64_t positions = 128, seed = 1;
  ConfigCli cli("analyze",
                "Analyses a pre-training checkpoint: positional-correlation heatmaps per head (PNG), the\n"
                "position-embedding probes of Wang & Chen (2020) (position regression MAE, pairwise order\n"
                "error; probes.md), and loss / learning-rate curves from the metrics JSONL (PNG). Draws with\n"
                "matplotlib through $TUPE_PYTHON.");
  cli.options().add_options()("checkpoint", po::value<std::string>(&checkpoint),
                              "checkpoint folder step_XXXXXXXX, or a checkpoint.dir (the newest whole one)")(
      "output", po::value<std::string>(&output), "output folder (created)")(
      "metrics", po::value<std::string>(&metrics),
      "metrics JSONL (default: <checkpoint.dir>/metrics/rank_0.jsonl when present)")(
      "positions", po::value<int64_t>(&positions)->default_value(128),
      "heatmap sequence length L (positions; capped at max_positions)")(
      "python", po::value<std::string>(&python), "Python with numpy, scikit-learn, matplotlib (default: $TUPE_PYTHON)")(
      "script", po::value<std::string>(&script),
      "plotting/probe script (default: the built-in tools/analyze/analyze_plots.py, copied to the output folder)")(
      "seed", po::value<int64_t>(&seed)->default_value(1), "seed of the probes' train/test split");
  if (!cli.parse(argc, argv)) return 0;
  TUPE_CHECK(!checkpoint.empty(), "analyze: no checkpoint given (--checkpoint DIR)");
  TUPE_CHECK(!output.empty(), "analyze: no output folder given (--output OUT)");
  analyze::AnalyzeOptions options;
  options.checkpoint = checkpoint;
  options.output = output;
  options.metrics = metrics;
  options.heatmap_positions = positions;
  options.python = python;
  options.script = script;
  options.seed = seed;
  std::cout << analyze::analyze_checkpoint(options);
  log::info("wrote " + output);
  return 0;
}

}  // namespace tupe::cli
