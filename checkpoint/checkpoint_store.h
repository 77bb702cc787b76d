// The checkpoint store (docs/formats.md "Checkpoints"; docs/architecture.md "Invariants":
// a checkpoint on disk is either whole or absent).
//
// Layout: <dir>/step_<8 digits>/ holding
//   model.safetensors      the weights (readable by Python's safetensors)
//   optimizer.safetensors  the optimizer state (optimizer.h), its kind in the metadata
//   trainer_state.json     steps, loss scaler, data position, config, vocab hash, tokenizer
//                          record (no RNG state)
//   vocab.txt | spm.model  the vocabulary, when the tokenizer record carries one (its
//                          "vocab_file" names it; listed in the manifest like the others)
//   manifest.json          written last: {"format": "tupe-checkpoint", "format_version": 2,
//                          "step": N, "files": {"model.safetensors": {"bytes": <count>,
//                          "sha256": "<hex>"}, ...}} (version 1, sizes only, is still read)
// Protocol: the files go into <dir>/.tmp-step_<8 digits>/, each one fsynced; then the
// folder is renamed to step_<8 digits> and <dir> is fsynced. A crash at any point leaves
// either the whole new checkpoint or none of it (a stale .tmp- folder, ignored and removed
// by the next save). latest() only returns checkpoints whose manifest is valid and whose
// files have the listed sizes (cheap); load() also re-hashes every file, so a file damaged
// after the save (same size, other bytes) is refused, and load_latest() (what
// `--resume auto` uses) then falls back to the next older checkpoint.
// Only one process (rank 0) writes to a store; the caller decides which.
#pragma once
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/checkpoint_options.h"
#include "checkpoint/named_tensors.h"
#include "checkpoint/optimizer_state.h"
#include "checkpoint/trainer_state.h"

namespace tupe::checkpoint {

/// What a checkpoint holds.
struct CheckpointContents {
  NamedTensors model;       ///< weights by name (any dtype and device; read back on the CPU)
  OptimizerState optimizer; ///< Optimizer::state_dict()
  TrainerState state;       ///< state.step names the folder
  /// Bytes of the vocabulary file named by state.tokenizer->vocab_file (its SHA-256 must be
  /// state.vocab_sha256); empty when the checkpoint carries none.
  std::string vocab_bytes;
};

/// A checkpoint read by load_latest().
struct LoadedCheckpoint {
  std::filesystem::path dir;  ///< its step_<N> folder
  CheckpointContents contents;
};

/// Exit status of a process killed by the test-only fault injection.
inline constexpr int kCrashInjectionExitCode = 86;

class CheckpointStore {
 public:
  /// Test-only fault injection: when the environment variable TUPE_TEST_CRASH_AFTER_FILES
  /// is a number n >= 1, save() calls std::_Exit(kCrashInjectionExitCode) right after
  /// writing its n-th file (1 model, 2 optimizer, 3 trainer state, 4 manifest, 5 after
  /// the rename, before retention). Throws tupe::Error on invalid options.
  explicit CheckpointStore(CheckpointOptions options);

  /// Creates options().dir if needed and writes then removes a probe file in it, so that
  /// an unwritable folder is found at the start of a run, not at its first save. Throws
  /// tupe::Error "<dir>: cannot create the checkpoint folder / cannot write in it: <reason>".
  void check_writable() const;

  /// Whether step `step` is a save point (every_steps > 0 and step % every_steps == 0).
  bool due(int64_t step) const;

  /// Writes a checkpoint for contents.state.step (replacing an existing one of that step),
  /// then applies retention. Returns the checkpoint folder. Throws tupe::Error naming the
  /// file on failure, leaving no partial checkpoint behind.
  std::filesystem::path save(const CheckpointContents& contents);

  /// Whether load() re-hashes every file (SHA-256). Under MPI only rank 0 does (about 1.3 GB
  /// at BERT-Base size) and the ranks agree on its verdict; the others check sizes,
  /// structure and keys only.
  enum class Hashes { kVerify, kSkip };

  /// Reads a checkpoint folder; validates the manifest and the files (sizes, SHA-256 of
  /// every file unless `hashes` is kSkip, safetensors structure, JSON keys) and that the
  /// step agrees. Tensors come back on the CPU. Throws ONE-line tupe::Error naming the file
  /// and the cause (also for a path that is no folder, or a checkpoint.dir given in place of
  /// a checkpoint). The one reader of resume, fine-tuning, evaluation, export and analysis.
  static CheckpointContents load(const std::filesystem::path& checkpoint_dir, Hashes hashes = Hashes::kVerify);

  /// A checkpoint folder from a user's path: `path` itself when it holds manifest.json, else
  /// the newest whole step_<N> folder under it. Throws tupe::Error "<path>: no such
  /// checkpoint folder" / "<path>: a file, not a checkpoint folder ..." / "<path>: holds no
  /// whole checkpoint ...".
  static std::filesystem::path resolve(const std::filesystem::path& path);

  /// The newest whole checkpoint folder under `dir`, or nullopt (no folder, or none whole).
  /// "Whole": a valid manifest and files of the listed sizes (contents are not read).
  static std::optional<std::filesystem::path> latest(const std::filesystem::path& dir);

  /// load() of the newest step_<N> folder under `dir` that loads without error, trying
  /// older ones after a failure; nullopt when none loads (or there is none). Saves are
  /// atomic, so every step_<N> folder that fails (manifest, sizes, SHA-256, contents) was
  /// damaged after its save: each one's one-line error is appended to `skipped` (may be
  /// null). `hashes` as load() (kSkip: damage that keeps the sizes goes unseen).
  static std::optional<LoadedCheckpoint> load_latest(const std::filesystem::path& dir,
                                                     std::vector<std::string>* skipped,
                                                     Hashes hashes = Hashes::kVerify);

  /// Re-hashes one checkpoint folder against its manifest (tupe verify --checkpoint): the
  /// manifest's checks of load() (format, step, every listed file present with its size),
  /// then the SHA-256 of every listed file. Returns one line per finding, "<file>: SHA-256
  /// <actual> differs from the manifest's <expected> (damaged checkpoint)" or the manifest's
  /// error; empty when whole. `bytes` (may be null) receives the bytes hashed.
  static std::vector<std::string> verify_files(const std::filesystem::path& checkpoint_dir, int64_t* bytes = nullptr);

  /// Whether `path` is a checkpoint folder itself (it holds manifest.json), not a folder of them.
  static bool is_checkpoint_folder(const std::filesystem::path& path);

  /// Steps of the whole checkpoints under `dir`, ascending.
  static std::vector<int64_t> whole_steps(const std::filesystem::path& dir);

  /// <dir>/step_<8 digits> (more digits past 99,999,999).
  static std::filesystem::path checkpoint_path(const std::filesystem::path& dir, int64_t step);

  /// Test-only: overrides the environment's TUPE_TEST_CRASH_AFTER_FILES (0 = off).
  void set_crash_after_files(int files) { crash_after_files_ = files; }

  const CheckpointOptions& options() const { return options_; }

 private:
  void after_file_written(int files_written) const;
  /// Deletes whole checkpoints that are neither among the newest keep_last nor multiples of
  /// keep_every; `keep_step` (the one just saved) always stays.
  void apply_retention(int64_t keep_step) const;

  CheckpointOptions options_;
  int crash_after_files_ = 0;
};

/// Throws ONE tupe::Error "<where>: ... differs in N key(s) that must match: key: saved
/// 'a', current 'b'; ..." listing every key of `must_match` whose value differs between
/// `saved` and `current` (a key present on one side only differs; "(absent)" is shown).
/// Keys outside `must_match` are not compared.
void check_config_compatible(const KeyValues& saved, const KeyValues& current,
                             const std::vector<std::string>& must_match, const std::string& where);

}  // namespace tupe::checkpoint
