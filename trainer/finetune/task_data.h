// One task's data, read and encoded once for all its runs: the train split (or a seeded
// random subset of it), every dev split, and the test splits for submission. Every rank
// reads and encodes the same files (deterministic), so ranks agree without communication.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "data_pipeline/tokenizer.h"
#include "trainer/finetune/encoding.h"
#include "trainer/finetune/finetune_config.h"
#include "trainer/finetune/tasks/tasks.h"

namespace tupe::finetune {

struct TaskData {
  const TaskSpec* task = nullptr;
  EncodedSplit train;                      ///< the rows trained on (subset when train_rows > 0)
  /// The rows held out of train to choose epochs and LRs (finetune.selection_fraction > 0;
  /// name "selection"); empty otherwise, and then the first dev split chooses.
  EncodedSplit selection;
  std::vector<EncodedSplit> dev;           ///< aligned with task->dev
  std::vector<const SplitSpec*> test_specs;///< test files read (empty without predict_test)
  std::vector<EncodedSplit> test;          ///< aligned with test_specs
  int64_t train_rows_in_file = 0;          ///< usable train rows before the subset
  int64_t max_length = 0;                  ///< tokens per example incl. special tokens
  std::map<std::string, int64_t> skipped_rows;  ///< split name -> bad rows skipped (every split read)
  std::vector<std::string> skipped_messages;    ///< "<file>:<line>: <cause>" of the first skipped rows
};

/// A permutation of 0..n-1 that is a pure function of `seed` (Fisher-Yates driven by
/// SplitMix64 from state `seed`, common/mix64.h; the same on every platform and rank).
std::vector<int64_t> permutation(int64_t n, uint64_t seed);

/// Fails fast, before any training: throws ONE tupe::Error "<data_dir>: N GLUE file(s)
/// missing: ..." listing every train/dev (and, with `with_test`, test) file of `tasks` that
/// does not exist.
void check_task_files(const std::vector<const TaskSpec*>& tasks, const std::string& data_dir, bool with_test);

/// The same files as (key, value) entries for the ranks' agreement (dist/small_collectives.h):
/// "<task> <split>" -> "<file>, <B> bytes" ("unreadable" when its size cannot be read).
std::vector<std::pair<std::string, std::string>> describe_task_files(const std::vector<const TaskSpec*>& tasks,
                                                                     const std::string& data_dir, bool with_test);

/// Splits `rows` train rows into (train, selection) row indices, each in file order: the
/// selection split is the first round(fraction x rows) of permutation(rows, seed') with
/// seed' = hash_words({data_seed, 2}), a pure function of (rows, fraction, data_seed).
/// Throws tupe::Error "<task>: finetune.selection_fraction ..." when either side would be empty.
std::pair<std::vector<int64_t>, std::vector<int64_t>> selection_rows(const std::string& task, int64_t rows,
                                                                     double fraction, int64_t data_seed);

/// Reads and encodes `task`'s files under config.data_dir: train (subset of
/// config.train_rows rows drawn with config.data_seed, kept in file order; with
/// config.selection_fraction > 0, the selection split then held out of it by selection_rows),
/// the dev splits, and the test splits when config.predict_test. `max_length` >= 3. Throws
/// tupe::Error naming the file (and line) on bad input.
TaskData load_task_data(const TaskSpec& task, const FinetuneOptions& config, const data_pipeline::Tokenizer& tokenizer,
                        int64_t max_length, bool with_test, int num_threads);

/// Reads and encodes only the dev and test splits (for `tupe evaluate`).
TaskData load_eval_data(const TaskSpec& task, const FinetuneOptions& config, const data_pipeline::Tokenizer& tokenizer,
                        int64_t max_length, bool with_test, int num_threads);

}  // namespace tupe::finetune
