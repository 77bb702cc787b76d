// Every INI section some subcommand reads, with its field table: a config file may hold the
// sections of other subcommands (one file for a whole project), and those are validated
// here too, so a typo fails now rather than in the run that reads it. What is checked of
// another subcommand's section is what the file says: its keys, their values' syntax and
// ranges, and how its values fit together -- never what only the owning subcommand needs at
// run time (an input path `tupe vocab` takes on its command line, say): a struct with such
// requirements splits its validate() into check_values() and the requirements, and only
// check_values() runs here.
#include "checkpoint/checkpoint_options.h"
#include "cli/config_cli.h"
#include "common/error.h"
#include "data_pipeline/loader_config.h"
#include "data_pipeline/preprocess.h"
#include "data_pipeline/text/sentencepiece_train.h"
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

struct KnownSection {
  const char* name;
  const char* read_by;
  void (*check)(const KeyValues&, const std::string&, const std::string&);
};

const KnownSection kKnownSections[] = {
    {"model", "info, pretrain", &check_fields<model::ModelOptions>},
    {"data", "pretrain", &check_fields<data_pipeline::DataOptions>},
    {"optimizer", "pretrain, finetune", &check_fields<trainer::OptimizerOptions>},
    {"precision", "pretrain, finetune, evaluate", &check_fields<trainer::PrecisionOptions>},
    {"checkpoint", "pretrain", &check_fields<checkpoint::CheckpointOptions>},
    {"dist", "pretrain, finetune, evaluate", &check_fields<dist::DistOptions>},
    {"train", "pretrain", &check_fields<pretrain::TrainOptions>},
    {"finetune", "finetune, evaluate", &check_fields<finetune::FinetuneOptions>},
    {"task", "finetune, evaluate", &check_fields<finetune::TaskOptions>},
    {"tokenizer", "preprocess, pretrain, finetune, evaluate", &check_fields<data_pipeline::TokenizerOptions>},
    {"preprocess", "preprocess", &check_fields<data_pipeline::PreprocessOptions>},
    {"vocab", "vocab", &check_fields<data_pipeline::VocabOptions>},
};

}  // namespace

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
  for (const auto& s : kKnownSections) out += (out.empty() ? "" : ", ") + std::string(s.name);
  return out;
}

}  // namespace tupe::cli
