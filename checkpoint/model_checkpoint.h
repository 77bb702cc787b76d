// The one checkpoint -> model loader: what fine-tuning, evaluation, export, prediction,
// analysis and a warm start (train.init_from) read. A checkpoint is either
//   - a pre-training checkpoint of `tupe pretrain`: encoder.* and mlm_head.*, or
//   - a model of `tupe finetune`: encoder.* and sentence_head.*, config keys glue.*
//     (docs/formats.md "Fine-tuned models"); its MLM head is not saved, or
//   - a Hugging Face BERT folder (checkpoint/hf_import.h), read as a BERT-A at step 0 whose
//     saved config is its config.json's model, whose tokenizer record is its vocab.txt, and
//     whose pooler (when it has one) is kept apart for fine-tuning's sentence head.
// Rules: the model config is the checkpoint's own, read strictly from its "model.*" keys
// (model::model_config_from_saved: every key of ModelOptions must be there, a default never
// fills a gap); tensors are copied strictly: a missing, unexpected or mis-shaped tensor --
// which is also what another positional variant looks like -- is ONE error listing every
// name.
#pragma once
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/checkpoint_store.h"
#include "checkpoint/named_tensors.h"
#include "common/config_fields.h"
#include "model/config.h"
#include "model/tupe_bert.h"

namespace tupe::checkpoint {

/// A checkpoint read as a model (tensors on the CPU, as saved).
struct ModelCheckpoint {
  std::filesystem::path dir;         ///< the step_<N> folder read
  CheckpointContents contents;       ///< tensors, optimizer state, trainer state (saved config, vocabulary hash)
  model::ModelOptions config;        ///< from the saved model.* keys
  bool has_mlm_head = false;         ///< mlm_head.* saved (a pre-training checkpoint)
  int64_t num_labels = 0;            ///< rows of sentence_head.out.weight (a fine-tuned model; 1 = regression), else 0
  std::string task;                  ///< glue.task of a fine-tuned model, else ""
  int64_t max_length = 0;            ///< glue.max_length of a fine-tuned model, else 0
  std::vector<std::string> labels;   ///< glue.labels: label names in id order (may be empty)
  /// Where it came from: "tupe" (a checkpoint of tupe) or "hf-bert" (a Hugging Face BERT folder).
  std::string source_format = "tupe";
  std::string hf_architecture;         ///< the HF folder's architecture ("BertModel", ...), else ""
  NamedTensors pooler;                 ///< an HF folder's bert.pooler.dense as sentence_head.dense.*, else empty
  std::vector<std::string> left_out;   ///< an HF folder's tensors with no place in tupe (NSP head, classifier)

  bool from_hf() const { return source_format == "hf-bert"; }
  int64_t step() const { return contents.state.step; }
  const std::string& vocab_sha256() const { return contents.state.vocab_sha256; }
  const KeyValues& saved_config() const { return contents.state.config; }
  /// A model of `tupe finetune` (a sentence head and glue.task).
  bool fine_tuned() const { return num_labels > 0 && !task.empty(); }
  /// <dir>/<tokenizer.vocab_file>: the vocabulary the checkpoint carries (its SHA-256 checked
  /// at load), or "" when it carries none (format version 1, or saved without one).
  std::filesystem::path carried_vocab() const {
    if (!vocab_location.empty()) return vocab_location;
    const auto& t = contents.state.tokenizer;
    return t && !t->vocab_file.empty() ? dir / t->vocab_file : std::filesystem::path();
  }
  /// Where carried_vocab() is when not <dir>/<vocab_file>: an HF folder's vocabulary taken from
  /// its tokenizer.json (hf_import.h); else empty.
  std::filesystem::path vocab_location;
  /// <dir>/model.safetensors, for error messages.
  std::string weights_file() const { return (dir / "model.safetensors").string(); }
};

/// Reads `path`: a step_<N> folder, or a folder holding them (the newest one that loads, as
/// `pretrain --resume auto`: each damaged newer one gets the warning "skipping a damaged
/// checkpoint: <why>"), through CheckpointStore::load with `hashes`; or a Hugging Face BERT
/// folder (hf_import.h; `hashes` does not apply: it has no manifest). Throws ONE-line
/// tupe::Error naming the folder or file and the cause (no checkpoint, bad manifest,
/// damaged file, a model key missing, neither an MLM head nor a sentence head, an HF folder
/// that is not BERT).
ModelCheckpoint read_model_checkpoint(const std::filesystem::path& path,
                                      CheckpointStore::Hashes hashes = CheckpointStore::Hashes::kVerify);

/// Throws tupe::Error "<trainer_state.json>: key 'config.glue.task' missing: not a fine-tuned
/// model of tupe finetune" unless `ckpt` is one.
void require_fine_tuned(const ModelCheckpoint& ckpt);

/// The checkpoint's model: TupeBert(config, num_labels), float32, every saved tensor copied
/// strictly (a fine-tuned model's MLM head stays at its init), in eval mode on the CPU.
/// `config` overrides the checkpoint's (e.g. another dropout; the shapes must agree). Throws
/// tupe::Error as copy_named_tensors does, and for an HF folder without an MLM head
/// (BertModel: nothing to predict or export with; fine-tune it or continue pre-training).
model::TupeBert build_model(const ModelCheckpoint& ckpt);
model::TupeBert build_model(const ModelCheckpoint& ckpt, const model::ModelOptions& config);

/// Copies the encoder tensors of `saved` (every tensor but mlm_head.*) into the encoder.*
/// parameters of `model`, strictly: ONE tupe::Error "<where>: N tensor name/shape/dtype
/// mismatch(es): missing: ...; unexpected: ..." (a sentence head in `saved` is unexpected:
/// fine-tuning starts from a pre-training checkpoint).
void load_encoder(model::TupeBertImpl& model, const NamedTensors& saved, const std::string& where);

/// The tokenizer settings the checkpoint records: its trainer-state "tokenizer" record, else
/// (checkpoints of format version 1) the tokenizer.kind and tokenizer.lower_case keys of its
/// saved config when both are there (what `tupe finetune` saved), else nullopt. `source`
/// (may be null) receives where they were read, for messages.
std::optional<TokenizerRecord> recorded_tokenizer(const ModelCheckpoint& ckpt, std::string* source = nullptr);

/// Refuses a vocabulary other than the checkpoint's: throws tupe::Error "<where>: the
/// checkpoint was trained with vocabulary sha256 X, the tokenizer's (tokenizer.vocab) is Y".
void check_vocabulary(const std::string& checkpoint_sha256, const std::string& tokenizer_sha256,
                      const std::string& where);

}  // namespace tupe::checkpoint
