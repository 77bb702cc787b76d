// Every INI section some subcommand reads, with its field table: a config file may hold the
// sections of other subcommands (one file for a whole project), and those are validated
// here too, so a typo fails now rather than in the run that reads it. What is checked of
// another subcommand's section is what the file says: its keys, their values' syntax and
// ranges, and how its values fit together -- never what only the owning subcommand needs at
// run time (an input path `tupe vocab` takes on its command line, say): a struct with such
// requirements splits its validate() into check_values() and the requirements, and only
// check_values() runs here. The same list gives the configuration reference
// (docs/config-reference.md, `tupe help --config-reference`).
#include <ostream>
#include <sstream>

#include "checkpoint/checkpoint_options.h"
#include "cli/config_cli.h"
#include "common/error.h"
#include "data_pipeline/loader_config.h"
#include "data_pipeline/preprocess.h"
#include "data_pipeline/sentencepiece_train.h"
#include "data_pipeline/text/tokenizer_factory.h"
#include "dist/options.h"
#include "model/config.h"
#include "trainer/finetune/finetune_config.h"
#include "trainer/finetune/tasks/custom_task.h"
#include "trainer/options.h"
#include "trainer/pretrain/train_options.h"

namespace tupe::cli {

namespace {

template <class S>
void check_fields(const KeyValues& kv, const std::string& where, const std::string& base) {
  S scratch;  // the defaults, then the file's values: keys, parses and ranges are checked
  S::fields().apply(scratch, S::fields().rebase_paths(kv, base), where);
  try {
    if constexpr (requires { scratch.check_values(); })
      scratch.check_values();  // validate() also demands what the owner needs at run time
    else
      scratch.validate();  // every check of validate() concerns the values alone
  } catch (const Error& e) {
    TUPE_FAIL(where << ": " << e.what());
  }
}

/// A Markdown table cell: '|' escaped, line breaks as spaces.
std::string cell(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '|') out += "\\|";
    else if (c == '\n') out += ' ';
    else out += c;
  }
  return out;
}

/// `text` as inline code (a "" default as `""`).
std::string code(const std::string& text) {
  std::string out(1, '`');
  out += cell(text.empty() ? std::string("\"\"") : text);
  out += '`';
  return out;
}

/// The reference rows of section `name`: one per field, then the removed keys.
template <class S>
void reference_rows(std::ostream& os, const std::string& name) {
  const auto& table = S::fields();
  os << "| key | type | unit | default | range | meaning |\n|---|---|---|---|---|---|\n";
  for (const auto& f : table.fields())
    os << "| " << code(name + "." + f.name) << " | " << f.type << " | " << cell(f.unit) << " | " << code(f.default_text)
       << " | " << cell(f.allowed()) << " | " << cell(f.help) << " |\n";
  if (!table.removed_keys().empty()) {
    os << "\nRemoved keys, refused in one line:\n\n";
    for (const auto& [key, why] : table.removed_keys()) os << "- " << code(name + "." + key) << ": " << why << "\n";
  }
}

struct KnownSection {
  const char* name;
  const char* read_by;
  void (*check)(const KeyValues&, const std::string&, const std::string&);
  void (*reference)(std::ostream&, const std::string&);
};

const KnownSection kKnownSections[] = {
    {"model", "info, pretrain", &check_fields<model::ModelOptions>, &reference_rows<model::ModelOptions>},
    {"data", "pretrain", &check_fields<data_pipeline::DataOptions>, &reference_rows<data_pipeline::DataOptions>},
    {"optimizer", "pretrain, finetune", &check_fields<trainer::OptimizerOptions>, &reference_rows<trainer::OptimizerOptions>},
    {"precision", "pretrain, finetune, evaluate", &check_fields<trainer::PrecisionOptions>, &reference_rows<trainer::PrecisionOptions>},
    {"checkpoint", "pretrain", &check_fields<checkpoint::CheckpointOptions>, &reference_rows<checkpoint::CheckpointOptions>},
    {"dist", "pretrain, finetune, evaluate", &check_fields<dist::DistOptions>, &reference_rows<dist::DistOptions>},
    {"train", "pretrain", &check_fields<pretrain::TrainOptions>, &reference_rows<pretrain::TrainOptions>},
    {"finetune", "finetune, evaluate", &check_fields<finetune::FinetuneOptions>, &reference_rows<finetune::FinetuneOptions>},
    {"task", "finetune, evaluate", &check_fields<finetune::TaskOptions>, &reference_rows<finetune::TaskOptions>},
    {"tokenizer", "preprocess, pretrain, finetune, evaluate", &check_fields<data_pipeline::TokenizerOptions>, &reference_rows<data_pipeline::TokenizerOptions>},
    {"preprocess", "preprocess", &check_fields<data_pipeline::PreprocessOptions>, &reference_rows<data_pipeline::PreprocessOptions>},
    {"vocab", "vocab", &check_fields<data_pipeline::VocabOptions>, &reference_rows<data_pipeline::VocabOptions>},
};

}  // namespace

void write_config_reference(std::ostream& os) {
  os << "# Configuration reference\n\n"
        "Every key of every INI section, as `tupe help --config-reference` prints it from the field tables\n"
        "compiled into the binary (this file is that output; `ctest -R docs_config_reference` fails when they\n"
        "differ). Set a key in a `--config` file (`[section]`, then `key = value`) or on the command line\n"
        "(`--section.key value`); [config.md](config.md) says how values are read, and `tupe <subcommand>\n"
        "--help` lists the keys each subcommand takes. The range is what the value must satisfy; a choice\n"
        "lists its words.\n";
  for (const auto& s : kKnownSections) {
    const std::vector<std::string> readers = split_comma_list(s.read_by);
    os << "\n## [" << s.name << "]\n\nRead by ";
    for (size_t i = 0; i < readers.size(); ++i)
      os << (i == 0 ? "" : i + 1 == readers.size() ? " and " : ", ") << "`tupe " << readers[i] << "`";
    os << ".\n\n";
    s.reference(os, s.name);
  }
}

std::vector<std::string> known_sections() {
  std::vector<std::string> out;
  for (const auto& s : kKnownSections) out.emplace_back(s.name);
  return out;
}

bool check_other_section(const std::string& name, const KeyValues& kv, const std::string& where,
                         const std::string& base) {
  for (const auto& s : kKnownSections)
    if (name == s.name) {
      s.check(kv, where + " (read by tupe " + s.read_by + ")", base);
      return true;
    }
  return false;
}

std::string known_section_names() {
  std::string out;
  for (const auto& s : known_sections()) out += (out.empty() ? "" : ", ") + s;
  return out;
}

}  // namespace tupe::cli
