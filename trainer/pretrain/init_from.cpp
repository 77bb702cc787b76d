// The warm-start phase of pre-training (pretrain_job.h): train.init_from read once, the model's
// shape taken from it (checkpoint/warm_start.h), and its weights copied into the new model.
//
// The rule with checkpoints (docs/warm-start.md "Resuming"): train.init_from seeds a fresh
// start only. When --resume finds a checkpoint of the run in checkpoint.dir, the run continues
// from it; the source is still read (the shape comes from it) and its model.safetensors must be
// the one the run started from (train.init_from_sha256, a key a resume must match).
#include <filesystem>

#include "common/error.h"
#include "common/sha256.h"
#include "dist/small_collectives.h"
#include "trainer/pretrain/pretrain_job.h"

namespace tupe::pretrain {

namespace fs = std::filesystem;

namespace {

/// Rank 0 reads the source (SHA-256s verified) and hashes its weights; the ranks agree on the
/// verdict; the others read the folder rank 0 took without re-hashing.
void read_source(PretrainJob& job, const std::string& path) {
  std::string error, chosen, sha;
  if (job.rank == 0) {
    try {
      job.source = checkpoint::read_model_checkpoint(path);
      chosen = job.source->dir.string();
      sha = file_sha256_hex(job.source->weights_file());
    } catch (const Error& e) {
      error = "train.init_from: " + std::string(e.what());
    }
  }
  error = dist::first_error(job.env, error, "train.init_from read");
  if (!error.empty()) throw AgreedError(error);
  chosen = dist::broadcast_string(job.env, chosen, "train.init_from read");
  sha = dist::broadcast_string(job.env, sha, "train.init_from read");
  if (job.rank != 0) {
    try {
      job.source = checkpoint::read_model_checkpoint(chosen, checkpoint::CheckpointStore::Hashes::kSkip);
    } catch (const Error& e) {
      error = "train.init_from: rank " + std::to_string(job.rank) + " on " + job.env.host_name() + ": " + e.what();
    }
  }
  error = dist::first_error(job.env, error, "train.init_from read");
  if (!error.empty()) throw AgreedError(error + " (is the folder on a file system every node shares?)");
  job.origin = checkpoint::WeightsOrigin{job.source->source_format, chosen, sha,
                                         job.source->step(), job.source->hf_architecture,
                                         model::to_string(job.source->config.position_encoding),
                                         job.source->config.max_positions};
}

}  // namespace

void init_from_source(PretrainJob& job) {
  const std::string path = job.cfg.train.init_from;
  if (path.empty()) return;
  std::error_code ec;
  if (fs::exists(path, ec) && !fs::is_directory(path, ec))  // every rank sees the same path: everyone's refusal
    throw AgreedError("train.init_from: " + path + " is a file; give a folder: a tupe checkpoint (step_<N>, or a "
                      "run's checkpoint.dir for its newest whole one) or a Hugging Face BERT folder");
  read_source(job, path);
  // Every rank checks the same config against the same source: a refusal is everyone's.
  try {
    const std::string& expected = job.cfg.train.init_from_sha256;
    TUPE_CHECK(expected.empty() || expected == job.origin->weights_sha256,
               "train.init_from_sha256: " << expected << " expected, but " << job.source->weights_file() << " has "
                                          << job.origin->weights_sha256);
    job.warm = checkpoint::plan_warm_start(*job.source, job.cfg.model, job.cfg.given);
  } catch (const AgreedError&) {
    throw;
  } catch (const Error& e) {
    throw AgreedError(e.what());
  }
  // The run's model is now the planned one: its effective config and checkpoints say so.
  job.cfg.model = job.warm->config;
  for (const auto& [k, v] : model::ModelOptions::fields().to_kv(job.cfg.model)) job.cfg.effective["model." + k] = v;
  job.cfg.train.init_from_sha256 = job.origin->weights_sha256;
  job.cfg.effective["train.init_from_sha256"] = job.origin->weights_sha256;
  const checkpoint::ModelCheckpoint& s = *job.source;
  std::string line = "initialising from " + s.dir.string() + " (" +
                     (s.from_hf() ? "Hugging Face " + s.hf_architecture : "tupe, step " + std::to_string(s.step())) +
                     ", " + model::variant_name(s.config) + ", d " + std::to_string(s.config.hidden_size) + ", " +
                     std::to_string(s.config.num_layers) + " layers; model.safetensors SHA-256 " +
                     job.origin->weights_sha256.substr(0, 12) + "...) as " + model::variant_name(job.cfg.model) +
                     ": a new run at step 0";
  if (!s.left_out.empty())
    line += "; left out: " + std::to_string(s.left_out.size()) + " tensor(s) with no place in tupe (" +
            s.left_out.front() + (s.left_out.size() > 1 ? ", ..." : "") + ")";
  if (s.fine_tuned() || !s.pooler.empty()) line += "; the source's sentence head / pooler is not used in pre-training";
  job.progress->message(line);
  for (const std::string& note : job.warm->notes) job.progress->message("  " + note);
}

void check_source_data(const PretrainJob& job) {
  if (!job.source) return;
  const data_pipeline::DatasetInfo& info = job.train_data->info();
  const std::string& theirs = job.source->vocab_sha256();
  const fs::path carried = job.source->carried_vocab();
  // The ranks agreed on the shards and read the same source: a refusal here is everyone's.
  if (!theirs.empty() && info.vocab_sha256 != theirs)
    throw AgreedError(
             "data.train_shards: " + info.files.front() + " was made with vocabulary SHA-256 " + info.vocab_sha256 +
             ", but train.init_from " + job.source->dir.string() + " with " + theirs + "; preprocess with its vocabulary" +
             (carried.empty() ? std::string() : " (--tokenizer.vocab " + carried.string() + ")"));
}

}  // namespace tupe::pretrain
