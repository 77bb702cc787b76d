// Every INI section some subcommand reads, with its field table: a config file may hold the
// sections of other subcommands (one file for a whole project), and those are validated
// here too, so a typo fails now rather than in the run that reads it.
#include "cli/config_cli.h"
#include "common/error.h"
#include "data_pipeline/loader_config.h"
#include "data_pipeline/preprocess.h"
#include "data_pipeline/text/sentencepiece_train.h"
#include "data_pipeline/text/tokenizer_factory.h"
#include "dist/options.h"
#include "model/config.h"
#include "trainer/glue/finetune_config.h"
#include "trainer/loop/train_options.h"
#include "trainer/options.h"

namespace tupe::cli {

namespace {

template <class S>
void check_fields(const FieldTable<S>& table, const KeyValues& kv, const std::string& where) {
  S scratch;  // the defaults, then the file's values: keys, parses and ranges are checked
  table.apply(scratch, kv, where);
  try {
    scratch.validate();
  } catch (const Error& e) {
    TUPE_FAIL(where << ": " << e.what());
  }
}

struct KnownSection {
  const char* name;
  const char* read_by;
  void (*check)(const KeyValues&, const std::string&);
};

const KnownSection kKnownSections[] = {
    {"model", "info, pretrain", [](const KeyValues& kv, const std::string& w) { check_fields(model::ModelConfig::fields(), kv, w); }},
    {"data", "pretrain", [](const KeyValues& kv, const std::string& w) { check_fields(data::LoaderConfig::fields(), kv, w); }},
    {"optimizer", "pretrain", [](const KeyValues& kv, const std::string& w) { check_fields(trainer::OptimizerOptions::fields(), kv, w); }},
    {"precision", "pretrain", [](const KeyValues& kv, const std::string& w) { check_fields(trainer::PrecisionOptions::fields(), kv, w); }},
    {"checkpoint", "pretrain", [](const KeyValues& kv, const std::string& w) { check_fields(trainer::CheckpointOptions::fields(), kv, w); }},
    {"dist", "pretrain, finetune, evaluate", [](const KeyValues& kv, const std::string& w) { check_fields(dist::DistOptions::fields(), kv, w); }},
    {"train", "pretrain", [](const KeyValues& kv, const std::string& w) { check_fields(trainer::TrainOptions::fields(), kv, w); }},
    {"finetune", "finetune, evaluate", [](const KeyValues& kv, const std::string& w) { check_fields(glue::FinetuneConfig::fields(), kv, w); }},
    {"tokenizer", "preprocess, finetune, evaluate", [](const KeyValues& kv, const std::string& w) { check_fields(data::TokenizerOptions::fields(), kv, w); }},
    {"preprocess", "preprocess", [](const KeyValues& kv, const std::string& w) { check_fields(data::PreprocessConfig::fields(), kv, w); }},
    {"vocab", "vocab", [](const KeyValues& kv, const std::string& w) { check_fields(data::SentencePieceTrainOptions::fields(), kv, w); }},
};

}  // namespace

bool check_other_section(const std::string& name, const KeyValues& kv, const std::string& where) {
  for (const auto& s : kKnownSections)
    if (name == s.name) {
      s.check(kv, where + " (read by tupe " + s.read_by + ")");
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
