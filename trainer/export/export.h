// `tupe export`: a pre-training checkpoint as a folder other tools load.
//   BERT-A  -> HuggingFace layout (format "hf"): config.json (BertConfig, BertForMaskedLM),
//              model.safetensors under HF names (trainer/export/hf_bert.h), vocab.txt,
//              tokenizer_config.json. `BertForMaskedLM.from_pretrained(OUT)` loads it.
//   others  -> tupe layout (format "tupe"): model.safetensors under tupe's names
//              (model/tupe_bert.h) and config.json {"format": "tupe-model",
//              "format_version": 1, "model": {field: value}, "position_encoding": ...,
//              "tensors": {name: {"shape": [...], "dtype": "F32", "meaning": "..."}},
//              "note": why there is no HF layout}, plus vocab.txt when given.
// The folder is written under OUT.tmp-<pid> and renamed to OUT (nothing half-written).
#pragma once
#include <filesystem>
#include <string>

#include "trainer/named_tensors.h"

namespace tupe::exporting {

struct ExportOptions {
  std::filesystem::path checkpoint;  ///< step_XXXXXXXX folder, or a checkpoint.dir (newest whole one)
  std::filesystem::path output;      ///< folder to create; must not exist yet
  std::filesystem::path vocab;       ///< vocab.txt to copy ("" = the checkpoint's tokenizer.vocab if readable)
  std::string format = "auto";       ///< "auto" (hf for BERT-A, else tupe), "hf", "tupe"
};

struct ExportResult {
  std::string format;                ///< "hf" or "tupe"
  std::filesystem::path checkpoint;  ///< the step folder read
  std::filesystem::path vocab;       ///< copied vocabulary ("" = none)
  std::string note;                  ///< one line for the user (e.g. why not HF)
};

/// Exports; throws ONE-line tupe::Error naming the checkpoint, the file or the option and the
/// cause: unknown format, HF format for a non-BERT-A model (with the reason), output exists,
/// vocabulary whose SHA-256 differs from the checkpoint's or whose size is not vocab_size.
ExportResult export_checkpoint(const ExportOptions& options);

/// The meaning of a tupe tensor name with its shape legend, for the tupe-format config.json
/// (e.g. "encoder.positional.table.weight" -> "TUPE position table p (rows, d): ...").
std::string describe_tupe_tensor(const std::string& name);

}  // namespace tupe::exporting
