// Outputs of `tupe finetune` (docs/formats.md "`results.json`"):
//   results.json       every run: task, LR, seed, the dev metrics of every epoch, the selected
//                      epoch; per LR the medians; the reported LR; rows read / skipped
//   results.md         a Markdown table laid out like the paper's Table 1 (MNLI-m/mm, QNLI,
//                      QQP, SST, CoLA, MRPC, RTE, STS, and the average of those 9 numbers), in
//                      percent, followed by a per-task detail table
//   submission/<X>.tsv the benchmark's submission files (docs/formats.md "`results.json`"): header
//                      "index<TAB>prediction", one row per test example, label names (STS-B:
//                      the score clipped to [0, 5], 3 decimals)
// Every file is written to a temporary sibling and renamed into place.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/config_fields.h"
#include "trainer/finetune/evaluation.h"
#include "trainer/finetune/protocol.h"

namespace tupe::finetune {

/// Facts of the job shown in the outputs.
struct ReportHeader {
  std::string model_name;      ///< row name of the table, e.g. "TUPE-R"
  int64_t pretrain_steps = 0;  ///< steps of the pre-training checkpoint
  std::string checkpoint;      ///< its folder
  int world_size = 1;
  std::string device;          ///< "cpu" / "cuda:0"
  std::string precision;       ///< "fp32" / "bf16" / "fp16" (precision.precision resolved)
  KeyValues config;            ///< the effective configuration
};

/// The JSON document of results.json (format "tupe-glue-results", version 1).
nlohmann::json results_json(const ReportHeader& header, const std::vector<TaskResult>& results);

/// The Markdown of results.md.
std::string results_markdown(const ReportHeader& header, const std::vector<TaskResult>& results);

/// One submission line's prediction text: the label name, or the score clipped to [0, 5]
/// with 3 decimals (STS-B; a custom regression task: unclipped, 9 significant digits).
std::string prediction_text(const TaskSpec& task, const Predictions& predictions, size_t row);

/// The submission file text: "index\tprediction\n" then one line per example.
/// Throws tupe::Error when the counts differ.
std::string submission_text(const TaskSpec& task, const std::vector<std::string>& index,
                            const Predictions& predictions);

/// Writes results.json, results.md and submission/<file> for every predicted test split.
/// Returns the paths written. Throws tupe::Error naming the file.
std::vector<std::filesystem::path> write_outputs(const std::filesystem::path& output_dir, const ReportHeader& header,
                                                 const std::vector<TaskResult>& results);

}  // namespace tupe::finetune
