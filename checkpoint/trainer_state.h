// trainer_state.json of a checkpoint: everything besides the tensors that an exact resume
// needs (docs/formats.md "Checkpoints"): steps, loss-scaler state, data position, the full effective
// config, the vocabulary hash, world size and the format version. No random-number
// generator state: every step reseeds from (seed, step, rank) and masks are a pure function
// of (seed, epoch, sample), so resume needs none (trainer/pretrain/resume.cpp). An "rng" entry
// of trainer-state version 1 files is accepted and ignored (docs/formats.md "Version notes").
//
//   {"format": "tupe-trainer-state", "format_version": 1, "step": 1200,
//    "scheduler_step": 1200, "world_size": 8, "vocab_sha256": "ab12...",
//    "loss_scaler": {"scale": 32768.0, "growth_tracker": 17, "consecutive_skips": 0,
//                    "total_skips": 3},
//    "data_position": {"epoch": 0, "consumed_samples": 307200},
//    "config": {"model.hidden_size": "768", ...},
//    "tokenizer": {"kind": "wordpiece", "lower_case": true, "vocab_file": "vocab.txt"},
//    "build": {"tupe": "0.1.0", "commit": "6f44105", "build_type": "Release", "libtorch": "2.15.0", ...}}
//
// "tokenizer" (format version 2, optional): how the model's text was tokenised, and the
// name of the vocabulary file the checkpoint folder carries ("" when it carries none); that
// file is listed in the manifest and its SHA-256 equals vocab_sha256. Version 1 files have
// no record and are still read.
//
// "origin" (optional; format version 2): a run started with train.init_from records its
// source: {"format", "path", "weights_sha256", "step", "architecture", "position_encoding",
// "max_positions"} (WeightsOrigin).
//
// "build" (optional in every version; common/build_info.h): which tupe wrote the file and
// what it was built with, for bug reports. Nothing reads it back into a run.
// "attention_kernels" (optional): {"training": ..., "evaluation": ...}, the kernels the
// saving run's attention got (model/attention.h attention_kernel). Not read back either.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/build_info.h"
#include "common/config_fields.h"

namespace tupe::checkpoint {

/// Checkpointed state of the loss scaler (host values).
struct LossScalerState {
  double scale = 1.0;             ///< S (factor)
  int64_t growth_tracker = 0;     ///< consecutive finite steps since the last scale change
  int64_t consecutive_skips = 0;  ///< consecutive skipped (inf/NaN) steps up to now
  int64_t total_skips = 0;        ///< skipped steps over the run (for reporting)
};

/// Version of the checkpoint layout (folder, manifest, trainer_state.json); bump on change.
/// 2: the tokenizer record and the carried vocabulary file. Version 1 is still read.
inline constexpr int64_t kCheckpointFormatVersion = 2;

/// How a checkpoint's model tokenises text (trainer_state.json "tokenizer").
struct TokenizerRecord {
  std::string kind;        ///< "wordpiece" | "sentencepiece"
  bool lower_case = true;  ///< text lower-cased (wordpiece: and accents stripped) before tokenisation
  std::string vocab_file;  ///< plain file name in the checkpoint folder ("" = no vocabulary carried)
};

/// Where a warm-started run's first weights came from (trainer_state.json "origin"; the run
/// records it at step 0 and every checkpoint after keeps it; docs/warm-start.md).
struct WeightsOrigin {
  std::string format;          ///< "tupe" (a tupe checkpoint) | "hf-bert" (a Hugging Face BERT folder)
  std::string path;            ///< the folder read (a step_<N> folder, or the HF folder)
  std::string weights_sha256;  ///< SHA-256 (hex) of its model.safetensors
  int64_t step = 0;            ///< the source's optimizer step (0 for an HF folder)
  std::string architecture;    ///< the HF architecture ("BertModel", ...), or "" for a tupe checkpoint
  std::string position_encoding;  ///< the source's variant ("bert-absolute", ...)
  int64_t max_positions = 0;   ///< the source's model.max_positions
};

/// Where the data stream stands (the sample order is a pure function of seed, epoch and
/// consumed samples; docs/architecture.md "Invariants").
struct DataPosition {
  int64_t epoch = 0;             ///< epoch of the next sample
  int64_t consumed_samples = 0;  ///< samples (sequences) consumed in that epoch, all ranks together
};

struct TrainerState {
  int64_t step = 0;            ///< optimizer steps completed (skipped fp16 steps included)
  int64_t scheduler_step = 0;  ///< LR-schedule updates completed; the next LR is lr(scheduler_step + 1)
  LossScalerState loss_scaler;
  DataPosition data;
  KeyValues config;          ///< full effective config, "section.key" -> value text
  std::string vocab_sha256;  ///< SHA-256 (hex) of the vocabulary file the model was trained with
  int64_t world_size = 1;    ///< ranks of the run that saved it
  int64_t format_version = kCheckpointFormatVersion;
  std::optional<TokenizerRecord> tokenizer;  ///< absent in version-1 files and when unknown
  std::optional<WeightsOrigin> origin;       ///< a warm-started run's source (train.init_from); absent otherwise
  /// The build that wrote the state: this one for a new state, the file's record for a read
  /// one (empty when the file has none; then none is written).
  std::vector<std::pair<std::string, std::string>> build = build_info();
  /// The attention kernels the run that saved it got ("training", "evaluation" -> the name
  /// model/attention.h's attention_kernel gives), for bug reports and comparisons across torch
  /// versions; empty when unknown (then none is written). Nothing reads it back into a run.
  std::vector<std::pair<std::string, std::string>> attention_kernels;

  /// `config` plus "vocab_sha256": the key -> value view for check_config_compatible().
  KeyValues compat_kv() const;
};

/// Serialises `state` as the JSON above (pretty-printed, stable key order).
std::string trainer_state_to_json(const TrainerState& state);

/// Parses and validates; throws ONE-line tupe::Error "<where>: key '<key>': <cause>" for a
/// missing key, a wrong type, bad hex, or an unsupported format/version.
TrainerState trainer_state_from_json(const std::string& text, const std::string& where);

}  // namespace tupe::checkpoint
