// `tupe export`: a checkpoint (of `tupe pretrain`, or a model saved by `tupe finetune`) as a
// folder other tools load. Formats:
//   hf-bert  BERT-A, post-LN -> transformers' own BERT, no remote code: config.json
//            (BertConfig), model.safetensors under HF names (tools/export/hf_bert.h);
//            BertForMaskedLM for a pre-training checkpoint, BertForSequenceClassification for
//            a fine-tuned one. `AutoModelForMaskedLM.from_pretrained(OUT)` loads it.
//   hf-tupe  any variant (TUPE-A/R, BERT-A/R; [CLS] untie on or off; post- or pre-LN) ->
//            config.json (TupeConfig with every constant and "auto_map"), tupe's own
//            configuration_tupe.py + modeling_tupe.py, model.safetensors
//            (tools/export/hf_tupe.h). `AutoModel`, `AutoModelForMaskedLM`,
//            `AutoModelForSequenceClassification.from_pretrained(OUT, trust_remote_code=True)`.
//   tupe     model.safetensors under tupe's names (model/tupe_bert.h) and config.json
//            {"format": "tupe-model", "format_version": 1, "model": {field: value},
//            "position_encoding": ..., "tensors": {name: {"shape", "dtype": "F32", "meaning"}}},
//            plus the vocabulary when given.
// --format auto (default) = hf: hf-bert where BERT can hold the model (BERT-A, post-LN),
// hf-tupe for everything else. hf-tupe can be asked for explicitly, also for BERT-A (one
// loading code path for all variants, e.g. to compare them).
// Both hf formats add the tokenizer files AutoTokenizer loads (tools/export/hf_tokenizer.h)
// when a vocabulary is known: --vocab, else the checkpoint's tokenizer.vocab when readable.
// WordPiece lower-casing: --lower-case, else the checkpoint's tokenizer.lower_case, else the
// lower_case its training shards (data.train_shards) record; an error when none says.
// Every format adds README.md, a Hugging Face model card generated from what the checkpoint
// records (tools/export/model_card.h).
// The folder is written under OUT.tmp-<pid> and renamed to OUT (nothing half-written).
#pragma once
#include <filesystem>
#include <string>

#include "checkpoint/named_tensors.h"
#include "tools/export/checkpoint_vocab.h"

namespace tupe::exporting {

/// What `tupe export` writes (--format).
enum class ExportFormat {
  kAuto,    ///< = kHf
  kHf,      ///< kHfBert where BERT can hold the model, else kHfTupe
  kHfBert,  ///< transformers' Bert* classes, no remote code
  kHfTupe,  ///< tupe's own modeling code (trust_remote_code=True)
  kTupe,    ///< safetensors under tupe's names + JSON
};
/// "auto" | "hf" | "hf-bert" | "hf-tupe" | "tupe".
std::string to_string(ExportFormat f);
/// Parses those words; throws tupe::Error "<option>: expected auto, hf, hf-bert, hf-tupe or tupe, got '<text>'".
ExportFormat parse_export_format(const std::string& option, const std::string& text);

struct ExportOptions {
  std::filesystem::path checkpoint;  ///< step_XXXXXXXX folder, or a folder of them (newest whole one)
  std::filesystem::path output;      ///< folder to create; must not exist yet
  std::filesystem::path vocab;       ///< vocab.txt / .model to use ("" = the checkpoint's tokenizer.vocab if readable)
  ExportFormat format = ExportFormat::kAuto;
  LowerCase lower_case = LowerCase::kAuto;  ///< WordPiece lower-casing (checkpoint_vocab.h)
};

struct ExportResult {
  ExportFormat format = ExportFormat::kTupe;  ///< what was written: kHfBert, kHfTupe or kTupe
  std::string architecture;          ///< e.g. "BertForMaskedLM", "TupeForSequenceClassification" ("" for tupe)
  std::filesystem::path checkpoint;  ///< the step folder read
  std::filesystem::path vocab;       ///< vocabulary used ("" = none)
  std::string note;                  ///< one line for the user (how to load it, or why this format)
};

/// Exports; throws ONE-line tupe::Error naming the checkpoint, the file or the option and the
/// cause: unknown format, hf-bert for a model BERT cannot hold (with the reason), output
/// exists, vocabulary whose SHA-256 differs from the checkpoint's or whose size is not
/// vocab_size, WordPiece lower-casing unknown.
ExportResult export_checkpoint(const ExportOptions& options);

/// The meaning of a tupe tensor name with its shape legend, for the tupe-format config.json
/// (e.g. "encoder.positional.table.weight" -> "TUPE position table p (rows, d): ...").
std::string describe_tupe_tensor(const std::string& name);

}  // namespace tupe::exporting
