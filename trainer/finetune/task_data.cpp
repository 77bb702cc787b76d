#include "trainer/finetune/task_data.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <sstream>

#include "common/error.h"
#include "common/mix64.h"
#include "trainer/finetune/tasks/reader.h"

namespace tupe::finetune {

namespace {

/// The stream of data_seed the selection split is drawn with (the train_rows subset: data_seed itself).
constexpr uint64_t kSelectionStream = 2;

/// Uniform integer in [0, bound) by rejection (no modulo bias).
uint64_t uniform_below(uint64_t& state, uint64_t bound) {
  const uint64_t limit = UINT64_MAX - UINT64_MAX % bound;
  uint64_t x = splitmix64_next(state);
  while (x >= limit) x = splitmix64_next(state);
  return x % bound;
}

void note_skipped(TaskData& data, const SplitData& split) {
  data.skipped_rows[split.split] = split.skipped_rows;
  for (const auto& m : split.skipped)
    if (data.skipped_messages.size() < 20) data.skipped_messages.push_back(m);
}

void load_eval_splits(TaskData& data, const TaskSpec& task, const FinetuneOptions& config,
                      const data_pipeline::Tokenizer& tokenizer, bool with_test, int num_threads) {
  const ReadOptions read{config.skip_bad_rows};
  for (const auto& spec : task.dev) {
    SplitData split = read_split(task, spec, config.data_dir, read);
    note_skipped(data, split);
    data.dev.push_back(encode_split(tokenizer, task, split, spec.pair(), data.max_length, num_threads));
  }
  if (!with_test) return;
  for (const auto& spec : task.test) {
    SplitData split = read_split(task, spec, config.data_dir, read);
    note_skipped(data, split);
    data.test_specs.push_back(&spec);
    data.test.push_back(encode_split(tokenizer, task, split, spec.pair(), data.max_length, num_threads));
  }
}

}  // namespace

std::vector<int64_t> permutation(int64_t n, uint64_t seed) {
  std::vector<int64_t> p(static_cast<size_t>(std::max<int64_t>(n, 0)));
  for (size_t i = 0; i < p.size(); ++i) p[i] = static_cast<int64_t>(i);
  uint64_t state = seed;
  for (size_t i = p.size(); i > 1; --i) std::swap(p[i - 1], p[uniform_below(state, i)]);
  return p;
}

namespace {

/// Every (task, split) file a run reads: train, dev, and with `with_test` the test files.
std::vector<std::pair<const TaskSpec*, const SplitSpec*>> task_files(const std::vector<const TaskSpec*>& tasks,
                                                                     bool with_test) {
  std::vector<std::pair<const TaskSpec*, const SplitSpec*>> out;
  for (const TaskSpec* t : tasks) {
    out.emplace_back(t, &t->train);
    for (const auto& s : t->dev) out.emplace_back(t, &s);
    if (with_test)
      for (const auto& s : t->test) out.emplace_back(t, &s);
  }
  return out;
}

}  // namespace

std::vector<std::pair<std::string, std::string>> describe_task_files(const std::vector<const TaskSpec*>& tasks,
                                                                     const std::string& data_dir, bool with_test) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [t, s] : task_files(tasks, with_test)) {
    std::error_code ec;
    const auto bytes = std::filesystem::file_size(split_path(*s, data_dir), ec);
    out.emplace_back(t->name + " " + s->name, s->file + ", " + (ec ? "unreadable" : std::to_string(bytes) + " bytes"));
  }
  return out;
}

void check_task_files(const std::vector<const TaskSpec*>& tasks, const std::string& data_dir, bool with_test) {
  std::vector<std::string> missing, missing_own;
  size_t missing_test = 0;
  for (const auto& [t, s] : task_files(tasks, with_test)) {
    if (std::filesystem::is_regular_file(split_path(*s, data_dir))) continue;
    if (s->own_path) {  // a custom task's file: its [task] key
      missing_own.push_back("task." + s->name + " = " + s->file);
      continue;
    }
    missing.push_back(s->file);
    missing_test += s->labelled() ? 0 : 1;
  }
  if (!missing_own.empty()) {
    std::ostringstream os;
    for (size_t i = 0; i < missing_own.size(); ++i) os << (i ? ", " : "") << missing_own[i];
    TUPE_FAIL("custom task: " << missing_own.size() << " file(s) missing: " << os.str());
  }
  if (missing.empty()) return;
  std::ostringstream os;
  for (size_t i = 0; i < missing.size(); ++i) os << (i ? ", " : "") << missing[i];
  TUPE_FAIL(data_dir << ": " << missing.size() << " GLUE file(s) missing: " << os.str()
                     << (missing_test == missing.size() ? " (finetune.predict_test = false skips the test files)" : ""));
}

std::pair<std::vector<int64_t>, std::vector<int64_t>> selection_rows(const std::string& task, int64_t rows,
                                                                     double fraction, int64_t data_seed) {
  const auto held = static_cast<int64_t>(std::llround(fraction * static_cast<double>(rows)));
  TUPE_CHECK(held >= 1 && held < rows, task << ": finetune.selection_fraction " << fraction << " of " << rows
                                            << " train rows leaves " << held << " for selection and " << rows - held
                                            << " to train; each needs at least one");
  std::vector<int64_t> order = permutation(rows, hash_words({static_cast<uint64_t>(data_seed), kSelectionStream}));
  std::vector<int64_t> selection(order.begin(), order.begin() + held), train(order.begin() + held, order.end());
  std::sort(selection.begin(), selection.end());
  std::sort(train.begin(), train.end());
  return {std::move(train), std::move(selection)};
}

TaskData load_task_data(const TaskSpec& task, const FinetuneOptions& config, const data_pipeline::Tokenizer& tokenizer,
                        int64_t max_length, bool with_test, int num_threads) {
  TUPE_CHECK(max_length >= 3, task.name << ": max_length must be >= 3, got " << max_length);
  TaskData data;
  data.task = &task;
  data.max_length = max_length;
  SplitData train = read_split(task, task.train, config.data_dir, ReadOptions{config.skip_bad_rows});
  note_skipped(data, train);
  data.train_rows_in_file = static_cast<int64_t>(train.examples.size());
  if (config.train_rows > 0 && config.train_rows < data.train_rows_in_file) {
    std::vector<int64_t> keep = permutation(data.train_rows_in_file, static_cast<uint64_t>(config.data_seed));
    keep.resize(static_cast<size_t>(config.train_rows));
    std::sort(keep.begin(), keep.end());
    std::vector<Example> subset;
    subset.reserve(keep.size());
    for (int64_t i : keep) subset.push_back(std::move(train.examples[static_cast<size_t>(i)]));
    train.examples = std::move(subset);
  }
  if (config.selection_fraction > 0) {
    auto [keep, held_out] = selection_rows(task.name, static_cast<int64_t>(train.examples.size()),
                                           config.selection_fraction, config.data_seed);
    SplitData selection = train;  // same file, task and labels; its own rows
    selection.split = "selection";
    selection.examples.clear();
    for (int64_t i : held_out) selection.examples.push_back(train.examples[static_cast<size_t>(i)]);
    std::vector<Example> rest;
    rest.reserve(keep.size());
    for (int64_t i : keep) rest.push_back(std::move(train.examples[static_cast<size_t>(i)]));
    train.examples = std::move(rest);
    data.selection = encode_split(tokenizer, task, selection, task.train.pair(), max_length, num_threads);
  }
  data.train = encode_split(tokenizer, task, train, task.train.pair(), max_length, num_threads);
  load_eval_splits(data, task, config, tokenizer, with_test, num_threads);
  return data;
}

TaskData load_eval_data(const TaskSpec& task, const FinetuneOptions& config, const data_pipeline::Tokenizer& tokenizer,
                        int64_t max_length, bool with_test, int num_threads) {
  TUPE_CHECK(max_length >= 3, task.name << ": max_length must be >= 3, got " << max_length);
  TaskData data;
  data.task = &task;
  data.max_length = max_length;
  load_eval_splits(data, task, config, tokenizer, with_test, num_threads);
  return data;
}

}  // namespace tupe::finetune
