#include "trainer/finetune/model_tokenizer.h"

#include <filesystem>

#include "common/error.h"
#include "common/log.h"
#include "common/sha256.h"

namespace tupe::finetune {

namespace {

/// Refuses a command-line value that differs from the record; warns about a file's (when `warn`).
void reconcile(const KeyValues& given, const std::string& key, const std::string& value, const std::string& recorded,
               const std::string& source, bool warn) {
  const auto it = given.find(key);
  if (it == given.end() || value == recorded) return;
  TUPE_CHECK(it->second != kGivenOnCommandLine,
             key << ": " << value << " contradicts the checkpoint's " << recorded << " (" << source << "); leave it out");
  if (warn)
    log::warn(key + " = " + value + " of " + it->second + " ignored: the checkpoint records " + recorded + " (" +
              source + ")");
}

}  // namespace

data_pipeline::TokenizerOptions checkpoint_tokenizer_options(const data_pipeline::TokenizerOptions& options,
                                                             const KeyValues& given,
                                                             const checkpoint::ModelCheckpoint& ckpt, bool warn) {
  data_pipeline::TokenizerOptions t = options;
  std::string source;
  if (const auto recorded = checkpoint::recorded_tokenizer(ckpt, &source)) {
    reconcile(given, "tokenizer.kind", data_pipeline::to_string(t.kind), recorded->kind, source, warn);
    reconcile(given, "tokenizer.lower_case", t.lower_case ? "true" : "false", recorded->lower_case ? "true" : "false",
              source, warn);
    t.kind = data_pipeline::parse_tokenizer_kind("tokenizer.kind", recorded->kind);
    t.lower_case = recorded->lower_case;
  }
  const std::filesystem::path carried = ckpt.carried_vocab();
  if (!t.vocab.empty() && !carried.empty()) {
    const auto it = given.find("tokenizer.vocab");
    if (it != given.end() && it->second != kGivenOnCommandLine && std::filesystem::is_regular_file(t.vocab) &&
        file_sha256_hex(t.vocab) != ckpt.vocab_sha256()) {
      if (warn)
        log::warn("tokenizer.vocab = " + t.vocab + " of " + it->second +
                  " ignored: it is not the checkpoint's vocabulary; using the one it carries (" + carried.string() +
                  ")");
      t.vocab = carried.string();
    }
  }
  if (t.vocab.empty()) {
    const auto saved = ckpt.saved_config().find("tokenizer.vocab");
    if (!carried.empty())
      t.vocab = carried.string();
    else if (saved != ckpt.saved_config().end() && !saved->second.empty() &&
             std::filesystem::is_regular_file(saved->second))
      t.vocab = saved->second;
    TUPE_CHECK(!t.vocab.empty(), "tokenizer.vocab: " << ckpt.dir.string()
                                                     << " carries no vocabulary and records none that is readable; "
                                                        "give --tokenizer.vocab (the pre-training vocabulary)");
  }
  return t;
}

}  // namespace tupe::finetune
