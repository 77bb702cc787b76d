// Reading a Hugging Face BERT folder as tupe's BERT-A (docs/warm-start.md "Continued pre-training of a Hugging Face BERT").
//
// A folder of transformers' save_pretrained: config.json (model_type "bert"), model.safetensors,
// vocab.txt and tokenizer_config.json. The architectures read: BertModel (no prefix, a pooler,
// no MLM head), BertForMaskedLM, BertForPreTraining ("bert." prefix, cls.predictions.*; the NSP
// head cls.seq_relationship.* is left out) and BertForSequenceClassification (its classifier is
// left out). The names go through model/hf_names.h, the same table `tupe export` writes.
//
// What becomes what:
//   config.json                 -> ModelOptions: bert-absolute, post-LN, [CLS] untie off; sizes,
//                                  eps, dropouts and initializer_range as the file says
//                                  (transformers' BertConfig defaults where a key is absent)
//   model.safetensors           -> encoder.* and (where present) mlm_head.*, float32;
//                                  bert.pooler.dense.* -> the pooler (sentence_head.dense.* of
//                                  `tupe finetune`, as BertForSequenceClassification starts)
//   vocab.txt (or tokenizer.json) -> the tokenizer record: wordpiece, its SHA-256 the vocabulary's
//   tokenizer_config.json       -> lower-casing: do_lower_case (BertTokenizer's default true
//                                  when the file or the key is absent)
// Refused, in one line naming the file and the cause: config.json missing or not BERT (another
// model_type, a non-absolute position_embedding_type, an activation other than erf GELU, a
// decoder), only pytorch_model.bin (the conversion command is in the message), a tensor
// missing or of the wrong shape (named by its HF name), a decoder not tied to the word
// embedding, a vocabulary with another number of entries than the embedding's rows.
// The vocabulary is vocab.txt, else (transformers 5 saves a BERT tokenizer as tokenizer.json
// alone) tokenizer.json's WordPiece vocabulary written as vocab.txt's lines, in id order: the
// same bytes, so the same SHA-256, as the vocab.txt it was made from.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

#include "checkpoint/named_tensors.h"
#include "checkpoint/trainer_state.h"
#include "model/config.h"

namespace tupe::checkpoint {

/// A Hugging Face BERT folder, read and checked.
struct HfBertFolder {
  std::filesystem::path dir;     ///< the folder
  std::string architecture;      ///< config.json "architectures"[0]; "BertModel" when the file names none
  model::ModelOptions config;    ///< the model it holds, as tupe options (validated)
  NamedTensors tensors;          ///< encoder.* and mlm_head.* (when the folder has the MLM head), float32
  NamedTensors pooler;           ///< sentence_head.dense.{weight,bias} from bert.pooler.dense.*, or empty
  std::vector<std::string> left_out;  ///< HF tensors with no place in tupe (NSP head, classifier), by HF name
  TokenizerRecord tokenizer;     ///< {"wordpiece", lower_case, "vocab.txt"}
  std::string vocab_sha256;      ///< SHA-256 of the vocabulary (vocab.txt's bytes)
  /// The vocabulary as a file: <dir>/vocab.txt, or tokenizer.json's written to the temporary
  /// folder under its SHA-256 (tupe-vocab-<hash>.txt).
  std::filesystem::path vocab_path;
  std::string weights_sha256;    ///< SHA-256 of <dir>/model.safetensors

  bool has_mlm_head() const;
  std::filesystem::path weights_file() const { return dir / "model.safetensors"; }
};

/// Whether `path` is a folder that looks like a Hugging Face model (it holds config.json, or
/// model.safetensors / pytorch_model.bin) and not a tupe checkpoint or run folder. Cheap: names only.
bool looks_like_hf_folder(const std::filesystem::path& path);

/// Reads and checks a Hugging Face BERT folder (see the top of this file). Throws ONE-line
/// tupe::Error "<file>: <cause>".
HfBertFolder read_hf_bert_folder(const std::filesystem::path& dir);

/// The one-line shell command that writes <dir>/model.safetensors from <dir>/pytorch_model.bin
/// with torch and safetensors (the setup's venv has both), for the refusal of a .bin-only folder.
std::string bin_conversion_command(const std::filesystem::path& dir);


}  // namespace tupe::checkpoint
