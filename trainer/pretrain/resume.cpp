// The resume phase of pre-training (pretrain_job.h): which checkpoint `--resume` names, that
// every rank took the same one, and restoring it into the job.
//
// What a checkpoint restores: weights, optimizer state (fp32 master weights and moments),
// the loss scaler, the step and LR-scheduler step, and the data position (epoch, consumed
// samples). Random-number generator states are not saved or restored: every step keys
// dropout by (train.seed, step, sample) (on CUDA: reseeds it from (train.seed, step, rank))
// and masks are a pure function of (data.seed, epoch, sample), so a resumed run draws exactly
// what the straight run drew without them
// (an "rng" entry of older checkpoints is ignored: docs/formats.md "Version notes").
#include <sstream>

#include "common/error.h"
#include "common/log.h"
#include "dist/small_collectives.h"
#include "trainer/pretrain/pretrain_job.h"

namespace tupe::pretrain {

namespace {

/// The checkpoint `resume` names, or none for a fresh start. Throws for damaged checkpoints
/// under --resume auto (starting fresh would overwrite them) and for --resume none over a
/// folder holding checkpoints (two runs would mix).
std::optional<checkpoint::LoadedCheckpoint> find_checkpoint(const PretrainConfig& cfg, const std::string& resume,
                                                         Progress& progress) {
  TUPE_CHECK(!resume.empty(), "--resume: empty; give auto, none or a checkpoint folder");
  if (resume == "auto") {
    std::vector<std::string> skipped;
    std::optional<checkpoint::LoadedCheckpoint> loaded =
        checkpoint::CheckpointStore::load_latest(cfg.checkpoint.dir, &skipped);
    for (const auto& why : skipped) log::warn("resume auto: skipping a damaged checkpoint: " + why);
    TUPE_CHECK(loaded || skipped.empty(), "resume auto: none of the "
                                              << skipped.size() << " checkpoint(s) under " << cfg.checkpoint.dir
                                              << " loads (newest: " << skipped.front()
                                              << "); move them away to start fresh, or pass --resume PATH");
    if (!loaded) progress.message("resume auto: no checkpoint under " + cfg.checkpoint.dir + ": starting fresh");
    return loaded;
  }
  if (resume == "none") {
    const auto existing = checkpoint::CheckpointStore::whole_steps(cfg.checkpoint.dir);
    TUPE_CHECK(existing.empty(), "--resume none: checkpoint.dir " << cfg.checkpoint.dir << " already holds "
                                                                  << existing.size() << " checkpoint(s) (newest step "
                                                                  << existing.back()
                                                                  << "); use --resume auto to continue that run, "
                                                                     "or another checkpoint.dir");
    return std::nullopt;
  }
  return checkpoint::LoadedCheckpoint{resume, checkpoint::CheckpointStore::load(resume)};
}

/// Every rank read the checkpoint itself: they must have taken the same step (-1 = fresh).
void agree_on_step(dist::Communicator& comm, int rank, int64_t mine) {
  const std::vector<int64_t> all = dist::all_gather_value(comm, mine, "resume step check");
  for (size_t r = 0; r < all.size(); ++r) {
    const int64_t theirs = all[r];
    TUPE_CHECK(theirs == mine, "resume: rank "
                                   << rank << " resumes at step " << mine << " but rank " << r << " at step " << theirs
                                   << " (-1: fresh start); is the checkpoint folder the same on every node?");
  }
}

/// Restores weights, optimizer, scaler, steps and data position from `ck` (read from `from`).
void restore(PretrainJob& job, const std::filesystem::path& from, checkpoint::CheckpointContents& ck) {
  model::model_config_from_saved(ck.state.config, (from / "trainer_state.json").string());  // every model key saved
  KeyValues saved = ck.state.compat_kv();
  saved.emplace("train.init_from_sha256", "");  // checkpoints from before the key: a run from scratch
  saved.emplace("data.mask_strategy", "token");  // checkpoints from before the key masked word pieces
  model::add_model_keys_added_later(saved);
  checkpoint::check_config_compatible(saved, checkpoint_record(job).compat_kv(), resume_must_match_keys(), from.string());
  const checkpoint::NamedTensors& named = job.step->parameters();
  checkpoint::copy_named_tensors(named, ck.model, (from / "model.safetensors").string());
  for (const auto& [name, t] : named)  // a run never saves inf/NaN weights: steps with them are skipped
    TUPE_CHECK(at::isfinite(t).all().item<bool>(), (from / "model.safetensors").string()
                                                       << ": tensor '" << name << "' holds inf/NaN values");
  try {
    job.step->optimizer().load_state_dict(ck.optimizer);
  } catch (const Error& e) {
    TUPE_FAIL((from / "optimizer.safetensors").string() << ": " << e.what());
  }
  try {
    job.step->load_state({ck.state.step, ck.state.scheduler_step, ck.state.loss_scaler});
  } catch (const Error& e) {
    TUPE_FAIL((from / "trainer_state.json").string() << ": " << e.what());
  }
  job.start_position = ck.state.data;
  job.resumed_state_file = (from / "trainer_state.json").string();
}

}  // namespace

void resume_job(PretrainJob& job, const std::string& resume) {
  // Rank 0 picks the checkpoint and verifies its SHA-256s; the other ranks read the one it
  // picked without re-hashing (sizes, structure and keys are still checked), so a resume
  // hashes the checkpoint once, not once per rank.
  std::optional<checkpoint::LoadedCheckpoint> loaded;
  std::string picked, error;
  if (job.rank == 0) {
    try {
      loaded = find_checkpoint(job.cfg, resume, *job.progress);
      if (loaded) picked = loaded->dir.string();
    } catch (const Error& e) {
      error = e.what();
    }
  }
  error = dist::first_error(job.env, error, "resume: the checkpoint choice");
  if (!error.empty()) throw AgreedError(error);  // every rank holds rank 0's message
  picked = dist::broadcast_string(job.env, picked, "resume: the checkpoint choice", 0);
  // A checkpoint.dir on node-local storage: rank 0's node has the checkpoint, others do not.
  std::string unreadable;
  if (job.rank != 0 && !picked.empty()) {
    try {
      loaded = checkpoint::LoadedCheckpoint{
          picked, checkpoint::CheckpointStore::load(picked, checkpoint::CheckpointStore::Hashes::kSkip)};
    } catch (const Error& e) {
      unreadable = "rank " + std::to_string(job.rank) + " on " + job.env.host_name() + ": " + e.what();
    }
  }
  unreadable = dist::first_error(job.env, unreadable, "resume: the checkpoint read");
  if (!unreadable.empty())
    throw AgreedError("resume: rank 0 picked " + picked + ", which not every rank can read (is checkpoint.dir on a " +
                      "file system every node shares?): " + unreadable);
  agree_on_step(job.comm(), job.rank, loaded ? loaded->contents.state.step : -1);
  if (!loaded) return;
  restore(job, loaded->dir, loaded->contents);
  std::ostringstream msg;
  msg << "resumed from " << loaded->dir.string() << " at step " << job.step->step() << " (epoch "
      << job.start_position.epoch << ", consumed samples " << job.start_position.consumed_samples << ", saved by "
      << loaded->contents.state.world_size
      << " ranks, now " << job.world << ")";
  job.progress->message(msg.str());
}  // the host copy of the checkpoint's weights and optimizer state is freed here

}  // namespace tupe::pretrain
