// `tupe predict`: the forward pass of a checkpoint of `tupe pretrain` (encoder + MLM head) or
// a model of `tupe finetune` (encoder + sentence head) on input lines (predict_input.h), in
// one process, batched, on the CPU or one GPU.
//   fill-mask   the top-k tokens with their probabilities (softmax over the whole vocabulary
//               of the MLM logits, float32) at each [MASK]; needs an MLM head. Output, one
//               record per input line, in input order:
//               jsonl  {"line": 1, "text": "...", "masks": [{"position": 4, "predictions":
//                        [{"token_id": 2003, "token": "is", "probability": 0.41}, ...]}]}
//                      (position: index in [CLS] ... [SEP]; token: the vocabulary entry,
//                      "##" kept for a WordPiece continuation)
//               tsv    header "line  mask  position  rank  token_id  token  probability", one
//                      row per prediction (mask and rank count from 1)
//   embeddings  a safetensors file: "input_ids" and "attention_mask" (N, L) int64 (L = the
//               longest line, [PAD] after each line's end), and "cls" (N, d) float32 (the
//               [CLS] vector, pooling cls) or "hidden" (N, L, d) float32 (the last hidden
//               states, 0 at padding, pooling tokens); metadata names the checkpoint.
// Shape legend: N input lines, L tokens of the longest line incl. [CLS]/[SEP], d model width.
// Files are written under a temporary name and renamed (nothing half-written).
#pragma once
#include <c10/core/Device.h>

#include <cstdint>
#include <filesystem>
#include <iosfwd>
#include <string>

#include "dist/device.h"
#include "tools/export/checkpoint_vocab.h"

namespace tupe::predict {

/// The file format of fill-mask output (--format).
enum class FillMaskFormat {
  kJsonl,  ///< one JSON record per input line
  kTsv,    ///< a header, then one row per prediction
};
/// "jsonl" | "tsv".
std::string to_string(FillMaskFormat f);
/// Parses "jsonl" | "tsv"; throws tupe::Error "<option>: expected jsonl or tsv, got '<text>'".
FillMaskFormat parse_fill_mask_format(const std::string& option, const std::string& text);

/// The autocast dtype of the forward pass (--precision).
enum class PredictPrecision {
  kFp32,  ///< float32 throughout
  kBf16,  ///< bfloat16 autocast (the softmax stays float32)
};
/// "fp32" | "bf16".
std::string to_string(PredictPrecision p);
/// Parses "fp32" | "bf16"; throws tupe::Error "<option>: expected fp32 or bf16, got '<text>'".
PredictPrecision parse_predict_precision(const std::string& option, const std::string& text);

/// What `tupe predict` computes (--mode).
enum class PredictMode {
  kFillMask,    ///< top-k tokens at each [MASK] (needs an MLM head)
  kEmbeddings,  ///< [CLS] vectors or last hidden states to safetensors
};
/// "fill-mask" | "embeddings".
std::string to_string(PredictMode m);
/// Parses "fill-mask" | "embeddings"; throws tupe::Error "<option>: expected fill-mask or embeddings, got '<text>'".
PredictMode parse_predict_mode(const std::string& option, const std::string& text);

/// Which hidden states embeddings keep (--pooling).
enum class Pooling {
  kCls,     ///< the [CLS] vector, (N, d)
  kTokens,  ///< the last hidden states, (N, L, d), 0 at padding
};
/// "cls" | "tokens".
std::string to_string(Pooling p);
/// Parses "cls" | "tokens"; throws tupe::Error "<option>: expected cls or tokens, got '<text>'".
Pooling parse_pooling(const std::string& option, const std::string& text);

struct PredictOptions {
  std::filesystem::path checkpoint;  ///< step_XXXXXXXX folder, or a folder of them (newest whole one)
  std::filesystem::path vocab;       ///< vocab.txt / .model ("" = the checkpoint's tokenizer.vocab when readable)
  exporting::LowerCase lower_case =
      exporting::LowerCase::kAuto;  ///< recorded by the checkpoint or its shards, or given
  PredictMode mode = PredictMode::kFillMask;
  std::string input = "-";           ///< text file, one input per line; "-" = stdin
  std::string output = "-";          ///< fill-mask: file or "-" (stdout); embeddings: a .safetensors file
  FillMaskFormat format = FillMaskFormat::kJsonl;  ///< fill-mask output: jsonl | tsv
  Pooling pooling = Pooling::kCls;                 ///< embeddings: cls ((N, d)) | tokens ((N, L, d))
  int64_t top_k = 5;                 ///< fill-mask: predictions per [MASK] (1..vocab_size)
  int64_t batch_size = 32;           ///< lines per forward pass
  dist::DeviceRequest device = dist::DeviceRequest::kAuto;  ///< auto (cuda:0 when a GPU is visible) | cpu | cuda
  PredictPrecision precision = PredictPrecision::kFp32;     ///< fp32 | bf16 (autocast; the softmax stays float32)
  int64_t threads = 0;               ///< intra-op CPU threads (0 = LibTorch's default)

  /// Throws tupe::Error "--<option>: <cause>" (pure; files are not opened).
  void validate() const;
};

/// What a run did, for the one summary line of the CLI.
struct PredictSummary {
  std::filesystem::path checkpoint;  ///< the step folder read
  std::filesystem::path vocab;       ///< the vocabulary used
  int64_t lines = 0;                 ///< input lines
  int64_t masks = 0;                 ///< [MASK] tokens predicted (fill-mask)
  int64_t max_tokens = 0;            ///< L: tokens of the longest line
  c10::Device device = c10::Device(c10::kCPU);
};

/// The device of a request: auto | cpu | cuda (cuda:0). Throws tupe::Error "--device cuda: ..."
/// when CUDA is asked for and no GPU is visible.
c10::Device pick_device(dist::DeviceRequest request);

/// Runs `options` reading stdin from `in` and writing fill-mask "-" output to `out`.
/// Throws ONE-line tupe::Error naming the file (and line) or option and the cause: bad
/// input line (predict_input.h), fill-mask on a model without an MLM head, no or a wrong
/// vocabulary, unreadable checkpoint; nothing is left at the output path then.
PredictSummary run_predict(const PredictOptions& options, std::istream& in, std::ostream& out);

}  // namespace tupe::predict
