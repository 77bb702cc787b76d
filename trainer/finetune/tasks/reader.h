// Readers of the GLUE task files (docs/formats.md "GLUE task files") into examples: the sentence(s), the
// gold label (id into TaskSpec::labels) or score (STS-B), and the index a test file gives
// for the submission. Every row is checked: the column count (as the header, or the fixed
// count of a header-less file), non-empty text, a known label / a score in [0, 5], a
// non-empty index. A bad row is an error "<file>:<line>: <cause>", unless skip_bad_rows,
// which skips it and counts it.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "trainer/finetune/tasks/tasks.h"

namespace tupe::finetune {

struct Example {
  std::string text_a;  ///< first sentence (never empty)
  std::string text_b;  ///< second sentence; "" for single-sentence tasks
  int64_t label = -1;  ///< classification: label id in TaskSpec::labels; -1 when unlabelled or regression
  double score = 0;    ///< regression (STS-B): the gold similarity in [0, 5]
  std::string index;   ///< test files: the id written to the submission file; "" otherwise
  int64_t line = 0;    ///< 1-based line in the file
};

struct SplitData {
  std::string task;     ///< e.g. "SST-2"
  std::string split;    ///< SplitSpec::name, e.g. "dev_matched"
  std::string path;     ///< the file read
  bool labelled = false;
  std::vector<Example> examples;     ///< in file order
  int64_t skipped_rows = 0;          ///< bad rows skipped (skip_bad_rows only)
  std::vector<std::string> skipped;  ///< "<file>:<line>: <cause>" of the first skipped rows (at most 10)
};

struct ReadOptions {
  bool skip_bad_rows = false;  ///< skip and count malformed rows instead of failing
};

/// Reads <glue_dir>/<split.file> for `task`. Throws tupe::Error "<file>:<line>: <cause>"
/// for the first bad row (unless options.skip_bad_rows), "<file>: ..." for a missing file
/// or column, and "<file>: no usable rows" when nothing is left.
SplitData read_split(const TaskSpec& task, const SplitSpec& split, const std::string& glue_dir,
                     const ReadOptions& options = {});

/// The path of `split` under `glue_dir`.
std::string split_path(const SplitSpec& split, const std::string& glue_dir);

}  // namespace tupe::finetune
