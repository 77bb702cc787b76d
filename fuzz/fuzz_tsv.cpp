// Fuzz target for the GLUE TSV readers: tupe::finetune::read_tsv(path, has_header)
// (trainer/finetune/tasks/tsv.cpp) and the row-level reader tupe::finetune::read_split(task, split, dir)
// (trainer/finetune/tasks/reader.cpp). Input layout: the first line selects the split ("SST-2/dev.tsv",
// optionally followed by " skip" for ReadOptions::skip_bad_rows; an unknown name picks a
// split by a hash of the line); the rest is the file's bytes, written to
// /dev/shm/.../glue/<split file> and read with both header settings, then by read_split.
// Expected on bad input: tupe::Error. A finding is anything else: a crash or sanitizer
// report (e.g. a column index outside a row), another exception type, a hang, a huge
// allocation, or rows whose line numbers do not increase.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "common/error.h"
#include "fuzz/fuzz_util.h"
#include "trainer/finetune/tasks/reader.h"
#include "trainer/finetune/tasks/tasks.h"
#include "trainer/finetune/tasks/tsv.h"

namespace {

struct Target {
  const tupe::finetune::TaskSpec* task;
  const tupe::finetune::SplitSpec* split;
};

const std::vector<Target>& targets() {
  static const std::vector<Target> all = [] {
    std::vector<Target> out;
    for (const auto& task : tupe::finetune::all_tasks()) {
      out.push_back({&task, &task.train});
      for (const auto& s : task.dev) out.push_back({&task, &s});
      for (const auto& s : task.test) out.push_back({&task, &s});
    }
    return out;
  }();
  return all;
}

void check_rows(const tupe::finetune::TsvTable& t) {
  int64_t last = 0;
  for (const auto& row : t.rows) {
    if (row.line <= last) tupe_fuzz::fail("read_tsv: row line numbers do not increase");
    if (row.fields.empty()) tupe_fuzz::fail("read_tsv: a row without fields");
    last = row.line;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::filesystem::path glue_dir = [] {
    const auto dir = tupe_fuzz::scratch_dir("tsv") / "glue";
    for (const Target& t : targets()) std::filesystem::create_directories((dir / t.split->file).parent_path());
    return dir;
  }();
  const char* text = reinterpret_cast<const char*>(data);
  const char* nl = static_cast<const char*>(std::memchr(text, '\n', size));
  const size_t selector_len = nl ? static_cast<size_t>(nl - text) : size;
  std::string selector(text, selector_len);
  const size_t body = nl ? selector_len + 1 : size;
  bool skip_bad_rows = false;
  if (selector.size() >= 5 && selector.compare(selector.size() - 5, 5, " skip") == 0) {
    skip_bad_rows = true;
    selector.resize(selector.size() - 5);
  }
  const Target* target = nullptr;
  for (const Target& t : targets())
    if (t.split->file == selector) target = &t;
  if (!target) {
    uint64_t h = 1469598103934665603ULL;
    for (unsigned char c : selector) h = (h ^ c) * 1099511628211ULL;
    target = &targets()[h % targets().size()];
  }
  const std::filesystem::path path = glue_dir / target->split->file;
  tupe_fuzz::write_file(path, data + body, size - body);

  for (bool header : {true, false}) {
    try {
      check_rows(tupe::finetune::read_tsv(path.string(), header));
      tupe_fuzz::note("read_tsv: accepted");
    } catch (const tupe::Error& e) {
      tupe_fuzz::note(e.what());
    }
  }
  try {
    tupe::finetune::ReadOptions options;
    options.skip_bad_rows = skip_bad_rows;
    const auto split = tupe::finetune::read_split(*target->task, *target->split, glue_dir.string(), options);
    if (split.examples.empty()) tupe_fuzz::fail("read_split returned no examples without an error");
    tupe_fuzz::note("read_split: accepted");
  } catch (const tupe::Error& e) {
    tupe_fuzz::note(e.what());
  }
  return 0;
}
