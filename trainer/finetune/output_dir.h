// The outputs a fine-tuning job writes into finetune.output_dir, found and removed as one
// whole: a rerun into a folder that holds a previous job's is refused or replaces it
// (finetune.overwrite), never a mix of the two jobs' files (docs/finetuning.md "What it writes").
#pragma once
#include <filesystem>
#include <string>
#include <vector>

namespace tupe::finetune {

/// The entries of `output_dir` a fine-tuning job writes: results.json, results.md,
/// effective_config.ini, submission/, models/, tensorboard/ (in that order).
const std::vector<std::string>& finetune_output_names();

/// Those of finetune_output_names() present in `output_dir` (empty when it does not exist).
std::vector<std::filesystem::path> previous_outputs(const std::filesystem::path& output_dir);

/// Refuses, or with `overwrite` removes, a previous job's outputs in `output_dir`; other
/// files there are left alone. Throws tupe::Error: "finetune.output_dir: <dir> holds a previous
/// fine-tuning (<entries>); ..." or "<entry>: cannot remove: <cause>".
void claim_output_dir(const std::filesystem::path& output_dir, bool overwrite);

/// Removes this job's outputs after a failure that left no complete task (a failed job leaves
/// no effective_config.ini or half a model behind). Never throws; returns what it removed.
std::vector<std::filesystem::path> remove_outputs(const std::filesystem::path& output_dir) noexcept;

}  // namespace tupe::finetune
