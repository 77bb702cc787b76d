// tupe analyze --checkpoint DIR --output OUT: heatmaps of the positional logit term per head
// (and, for BERT-A, the word-to-position / position-to-word terms TUPE removes), the
// position-embedding probes of Wang & Chen (2020) with a table, and the loss / learning-rate
// curves of the run's metrics JSONL. Outputs: tools/analyze/analysis.h.
// tupe analyze --run NAME=DIR [--run NAME=DIR ...] --output OUT: several runs' validation
// curves in one figure, with final losses and steps to reach the reference's final loss.
// Outputs: tools/analyze/compare.h.
// tupe analyze --glue NAME=DIR [--glue NAME=DIR ...] --output OUT: the GLUE average against
// pre-training steps from `tupe finetune` outputs (Figure 5c). Outputs: tools/analyze/glue_curve.h.
#include <boost/program_options/options_description.hpp>
#include <boost/program_options/value_semantic.hpp>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/config_cli.h"
#include "common/config_fields.h"
#include "common/error.h"
#include "common/log.h"
#include "tools/analyze/analysis.h"
#include "tools/analyze/compare.h"
#include "tools/analyze/glue_curve.h"

namespace po = boost::program_options;

namespace tupe::cli {

int run_analyze(int argc, char** argv) {
  std::string checkpoint, output, metrics, python, script, reference, losses;
  std::vector<std::string> runs, glue, length_shards;
  std::string validation_shards;
  int64_t positions = 128, seed = 1, eval_batches = -1;
  ConfigCli cli("analyze",
                "Analyses a pre-training checkpoint: positional-correlation heatmaps per head (PNG), the\n"
                "position-embedding probes of Wang & Chen (2020) (position regression MAE, pairwise order\n"
                "error; probes.md), and loss / learning-rate curves from the metrics JSONL (PNG). Draws with\n"
                "matplotlib through $TUPE_PYTHON.\n"
                "With --run NAME=DIR (repeated; one NAME per model, repeated for its seeds) instead of\n"
                "--checkpoint: every run's validation curve in one figure (seed means and bands), the final\n"
                "validation losses and the steps each model takes to reach the reference's final loss.\n"
                "With --glue NAME=DIR (repeated; DIR a `tupe finetune` output folder): the GLUE average against\n"
                "the pre-training step of the checkpoint each folder fine-tuned, one line per NAME.");
  cli.options().add_options()("checkpoint", po::value<std::string>(&checkpoint),
                              "checkpoint folder step_XXXXXXXX, or a checkpoint.dir (the newest whole one)")(
      "output", po::value<std::string>(&output), "output folder (created)")(
      "metrics", po::value<std::string>(&metrics),
      "metrics JSONL (default: <checkpoint.dir>/metrics/rank_0.jsonl when present)")(
      "positions", po::value<int64_t>(&positions)->default_value(128),
      "heatmap sequence length L (positions; capped at max_positions)")(
      "python", po::value<std::string>(&python), "Python with numpy, scikit-learn, matplotlib (default: $TUPE_PYTHON)")(
      "script", po::value<std::string>(&script),
      "plotting/probe script (default: the built-in tools/analyze/analyze_plots.py, with --run "
      "compare_plots.py, copied to the output folder)")(
      "seed", po::value<int64_t>(&seed)->default_value(1), "seed of the probes' train/test split")(
      "validation-shards", po::value<std::string>(&validation_shards),
      "with --checkpoint: also the masked-LM loss and accuracy by position bucket on these validation shards "
      "(masked as the run validated; mlm_by_position.csv)")(
      "eval-batches", po::value<int64_t>(&eval_batches)->default_value(-1),
      "with --validation-shards or --length-shards: the global batches scored (0 = all; -1 = the run's own "
      "train.eval_batches)")(
      "length-shards", po::value<std::vector<std::string>>(&length_shards)->composing(),
      "with --checkpoint: validation shards of the same text at another sequence length, each set scored over "
      "--eval-batches (mlm_by_length.csv; a set longer than the model's positions is named, not scored); "
      "repeat it, once per set")(
      "run", po::value<std::vector<std::string>>(&runs)->composing(),
      "NAME=DIR: a run to compare (DIR a checkpoint.dir or a metrics JSONL); repeat it, a NAME once per seed")(
      "glue", po::value<std::vector<std::string>>(&glue)->composing(),
      "NAME=DIR: fine-tuning results (DIR holds results.json) for the GLUE-average curve; repeat it")(
      "reference", po::value<std::string>(&reference),
      "with --run: the model whose final validation loss is the target (default: the first NAME)")(
      "losses", po::value<std::string>(&losses),
      "with --run: comma-separated validation losses (nats); a table gives the steps each model needs to reach "
      "each");
  if (!cli.parse(argc, argv)) return 0;
  // numpy seeds the probes' split: a seed in [0, 2^32).
  TUPE_CHECK(seed >= 0 && seed <= 4294967295LL, "analyze: --seed " << seed << ": must be in [0, 4294967295]");
  TUPE_CHECK(output.empty() || !std::filesystem::exists(output) || std::filesystem::is_directory(output),
             "analyze: --output " << output << ": a file, not a folder");
  TUPE_CHECK(static_cast<int>(!runs.empty()) + static_cast<int>(!glue.empty()) + static_cast<int>(!checkpoint.empty()) <= 1,
             "analyze: give one of --checkpoint (one checkpoint), --run (runs to compare) or --glue (fine-tuning results)");
  TUPE_CHECK((validation_shards.empty() && length_shards.empty()) || (runs.empty() && glue.empty()),
             "analyze: --validation-shards and --length-shards belong to --checkpoint (one checkpoint scored)");
  if (!glue.empty()) {
    TUPE_CHECK(metrics.empty() && reference.empty(), "analyze: --metrics and --reference do not apply to --glue");
    analyze::GlueCurveOptions curve;
    for (const auto& g : glue) curve.results.push_back(analyze::parse_compare_run(g));
    curve.output = output;
    curve.python = python;
    curve.script = script;
    std::cout << analyze::glue_curve(curve);
    return 0;
  }
  TUPE_CHECK(!output.empty(), "analyze: no output folder given (--output OUT)");
  if (!runs.empty()) {
    TUPE_CHECK(metrics.empty(), "analyze: --metrics belongs to --checkpoint; with --run, give each run's metrics as its DIR");
    analyze::CompareOptions compare;
    for (const auto& r : runs) compare.runs.push_back(analyze::parse_compare_run(r));
    compare.output = output;
    compare.reference = reference;
    for (const auto& l : split_comma_list(losses)) compare.losses.push_back(parse_double("--losses", l));
    compare.python = python;
    compare.script = script;
    std::cout << analyze::compare_runs(compare);
    log::info("wrote " + output);
    return 0;
  }
  TUPE_CHECK(reference.empty() && losses.empty(), "analyze: --reference and --losses belong to --run");
  const auto same_place = [](const std::string& p) {  // "dir", "dir/" and "./dir" name one set
    std::string c = std::filesystem::weakly_canonical(p).string();
    while (c.size() > 1 && c.back() == '/') c.pop_back();
    return c;
  };
  for (size_t i = 0; i < length_shards.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      TUPE_CHECK(same_place(length_shards[i]) != same_place(length_shards[j]),
                 "analyze: --length-shards " << length_shards[i] << ": given twice");
  TUPE_CHECK(eval_batches >= -1, "analyze: --eval-batches " << eval_batches << ": must be >= 0 (or -1: the run's own)");
  TUPE_CHECK(eval_batches == -1 || !validation_shards.empty() || !length_shards.empty(),
             "analyze: --eval-batches applies to --validation-shards and --length-shards, and neither is given");
  TUPE_CHECK(!checkpoint.empty(), "analyze: no checkpoint given (--checkpoint DIR, or --run NAME=DIR to compare runs)");
  analyze::AnalyzeOptions options;
  options.checkpoint = checkpoint;
  options.output = output;
  options.metrics = metrics;
  options.heatmap_positions = positions;
  options.python = python;
  options.script = script;
  options.seed = seed;
  options.validation_shards = validation_shards;
  options.eval_batches = eval_batches;
  options.length_shards = length_shards;
  std::cout << analyze::analyze_checkpoint(options);
  log::info("wrote " + output);
  return 0;
}

}  // namespace tupe::cli
