// record_tokenizer: what the job's checkpoints record about the tokenizer (docs/formats.md
// "Checkpoints": the tokenizer record and the carried vocabulary; docs/config.md
// "[tokenizer]": the shards' record wins over a config file's values, a contradicting
// command-line value is refused).
#include <filesystem>

#include "checkpoint/durable_io.h"
#include "common/config_given.h"
#include "common/error.h"
#include "common/log.h"
#include "common/sha256.h"
#include "data_pipeline/text/tokenizer_factory.h"
#include "trainer/pretrain/pretrain_job.h"

namespace tupe::pretrain {

namespace {
namespace fs = std::filesystem;

/// Where the user set tokenizer.<key>: kGivenOnCommandLine, a config file, or "" (not set).
std::string given_at(const PretrainJob& job, const std::string& key) {
  const auto it = job.cfg.given.find("tokenizer." + key);
  return it == job.cfg.given.end() ? "" : it->second;
}

/// A set value that differs from the shards': refused when typed on the command line,
/// ignored with a warning (rank 0) when it comes from a config file.
void differs(const PretrainJob& job, const std::string& key, const std::string& value, const std::string& shards,
             const std::string& shard_file) {
  const std::string where = given_at(job, key);
  if (where.empty() || value == shards) return;
  TUPE_CHECK(where != kGivenOnCommandLine, "tokenizer." << key << ": " << value << " contradicts the shards' " << shards
                                                        << " (" << shard_file << ")");
  if (job.rank == 0)
    log::warn("tokenizer." + key + " = " + value + " of " + where + " ignored: the shards (" + shard_file + ") say " +
              shards);
}

}  // namespace

void record_tokenizer(PretrainJob& job) {
  const data_pipeline::DatasetInfo& info = job.train_data->info();
  const data_pipeline::TokenizerOptions& t = job.cfg.tokenizer;
  data_pipeline::TokenizerOptions::fields().check(t);
  const std::string shard = info.files.front();
  // The shards say how their ids were made (NVIDIA shards record neither; then the config).
  std::string kind = info.tokenizer_kind;
  bool lower_case = info.lower_case;
  bool lower_known = info.format == "tupe";
  const std::string configured_kind = data_pipeline::to_string(t.kind);
  if (kind.empty()) {
    if (!given_at(job, "kind").empty()) kind = configured_kind;
  } else {
    differs(job, "kind", configured_kind, kind, shard);
  }
  if (!lower_known && !given_at(job, "lower_case").empty()) {
    lower_case = t.lower_case;
    lower_known = true;
  } else if (lower_known) {
    differs(job, "lower_case", t.lower_case ? "true" : "false", lower_case ? "true" : "false", shard);
  }
  // The vocabulary file, when it is the shards' (by SHA-256).
  std::string bytes;
  if (!t.vocab.empty() && !info.vocab_sha256.empty()) {
    const bool typed = given_at(job, "vocab") == kGivenOnCommandLine;
    std::string problem;
    if (!fs::is_regular_file(t.vocab)) {
      problem = fs::is_directory(t.vocab) ? "a folder, not a vocabulary file" : "no such file";
    } else {
      bytes = checkpoint::read_file_bytes(t.vocab);
      const std::string sha = sha256_hex(bytes);
      if (sha != info.vocab_sha256)
        problem = "SHA-256 " + sha + " differs from the shards' vocabulary " + info.vocab_sha256 + " (" + shard + ")";
    }
    TUPE_CHECK(problem.empty() || !typed, "tokenizer.vocab: " << t.vocab << ": " << problem);
    if (!problem.empty()) {
      bytes.clear();
      if (job.rank == 0)
        log::warn("tokenizer.vocab = " + t.vocab + " of " + given_at(job, "vocab") + " ignored: " + problem);
    }
  }
  if (job.source) {  // train.init_from: the source tokenised as the shards did, and carries its vocabulary
    std::string recorded_where;
    const auto recorded = checkpoint::recorded_tokenizer(*job.source, &recorded_where);
    if (recorded && lower_known && !kind.empty())
      TUPE_CHECK(recorded->kind == kind && recorded->lower_case == lower_case,
                 "data.train_shards: " << shard << " was tokenised " << kind << (lower_case ? " lower-cased" : " cased")
                                       << ", but train.init_from " << job.source->dir.string() << " records "
                                       << recorded->kind << (recorded->lower_case ? " lower-cased" : " cased") << " ("
                                       << recorded_where << ")");
    const fs::path carried = job.source->carried_vocab();
    if (bytes.empty() && !carried.empty() && job.source->vocab_sha256() == info.vocab_sha256)
      bytes = checkpoint::read_file_bytes(carried);
  }
  if (kind.empty() || !lower_known) {
    if (job.rank == 0)
      log::warn("checkpoints record no tokenizer: the shards (" + shard +
                ") do not say how they were tokenised; set tokenizer.kind and tokenizer.lower_case");
    return;
  }
  checkpoint::TokenizerRecord record{kind, lower_case, ""};
  if (!bytes.empty()) {
    record.vocab_file = kind == "sentencepiece" ? "spm.model" : "vocab.txt";
    job.vocab_bytes = std::move(bytes);
  } else if (job.rank == 0) {
    log::info("checkpoints carry no vocabulary (no tokenizer.vocab of the shards' given): export and predict will "
              "need --vocab");
  }
  job.tokenizer_record = record;
}

void load_word_boundaries(PretrainJob& job) {
  const data_pipeline::MaskStrategy strategy = job.cfg.data.mask_strategy;
  if (strategy == data_pipeline::MaskStrategy::kToken) return;
  const data_pipeline::DatasetInfo& info = job.train_data->info();
  const std::string what = std::string("data.mask_strategy = ") + data_pipeline::to_string(strategy);
  // The vocabulary of the shards' SHA-256: tokenizer.vocab, else the one train.init_from carries
  // (shards that record no hash, NVIDIA's, take tokenizer.vocab as given).
  data_pipeline::TokenizerOptions options = job.cfg.tokenizer;
  std::string path;
  const auto matches = [&](const std::string& p) {
    return fs::is_regular_file(p) &&
           (info.vocab_sha256.empty() || sha256_hex(checkpoint::read_file_bytes(p)) == info.vocab_sha256);
  };
  if (!options.vocab.empty() && matches(options.vocab))
    path = options.vocab;
  else if (job.source && !job.source->carried_vocab().empty() && matches(job.source->carried_vocab().string()))
    path = job.source->carried_vocab().string();
  TUPE_CHECK(!path.empty(), what << ": the word boundaries come from the vocabulary the shards were made with ("
                                 << info.files.front() << (info.vocab_sha256.empty() ? "" : ", SHA-256 ")
                                 << info.vocab_sha256 << "); set tokenizer.vocab to that file"
                                 << (options.vocab.empty() ? "" : " (" + options.vocab + " is not it)"));
  options.vocab = path;
  options.kind = data_pipeline::resolve_tokenizer_kind(options, false);
  if (job.tokenizer_record) options.lower_case = job.tokenizer_record->lower_case;
  const auto tokenizer = data_pipeline::make_tokenizer(options);
  job.word_boundaries = data_pipeline::WordBoundaries::of(*tokenizer);
  TUPE_CHECK(job.word_boundaries->vocab_size() == info.vocab_size,
             what << ": " << path << " holds " << job.word_boundaries->vocab_size() << " ids, the shards ("
                  << info.files.front() << ") " << info.vocab_size);
  if (job.rank == 0)
    log::info(what + ": word boundaries from " + path + " (" + std::to_string(job.word_boundaries->continuation_count()) +
              " of " + std::to_string(info.vocab_size) + " ids continue a word)");
}

}  // namespace tupe::pretrain
