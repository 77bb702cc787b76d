// `tupe analyze`: what a checkpoint's position encoding learned, and how its run went.
// The C++ side computes the numbers and writes them (safetensors, CSV); analyze_plots.py
// ($TUPE_PYTHON: numpy, scikit-learn, matplotlib) draws the PNGs and runs the probes.
//
// Written under OUT:
//   positional.safetensors  "positional_term" (H, L, L) float32: the positional logits every
//       layer adds, after the [CLS] reset: PositionalTerm::forward(L) (TUPE-A/R, BERT-R);
//       for BERT-A the first layer's position-to-position term
//         PP_h[i, j] = (p_i W^Q_h)(p_j W^K_h)^T / sqrt(d_h)
//       and the two mixed terms TUPE removes (Eq. 4 of the paper, expanding (w + p)W^Q...):
//         "word_to_position" (H, L): WP_h[j] = (w̄ W^Q_h + b^Q_h)(p_j W^K_h)^T / sqrt(d_h)
//         "position_to_word" (H, L): PW_h[i] = (p_i W^Q_h)(w̄ W^K_h + b^K_h)^T / sqrt(d_h)
//       with w̄ the mean word embedding over the vocabulary (a per-head profile over key resp.
//       query positions; the embedding LayerNorm is left out, as in the paper's expansion);
//       for BERT-A^d the same three terms with its own position projections and scale
//       (docs/model.md "BERT-A^d"), p~_t = LN(p_t) (the position table's LayerNorm):
//         PP_h[i, j] = (p~_i U^Q_h + c^Q_h)(p~_j U^K_h + c^K_h)^T / sqrt(4 d_h)
//         WP_h[j] = (w̄ W^Q_h + b^Q_h)(p~_j U^K_h + c^K_h)^T / sqrt(4 d_h),  PW likewise;
//       for ALiBi its fixed bias -m_h |i - j|; for RoPE the first layer's mean-word query and
//       key rotated to every position, PP_h[i, j] = R_i(w̄ W^Q_h + b^Q_h) . R_j(w̄ W^K_h + b^K_h)
//       / sqrt(d_h) (the pattern the rotation alone imposes); for NoPE zeros (it has no term).
//   position_table.safetensors  "table" (N, d) float32 and "positions" (N) int64: the learned
//       position vectors and the sequence positions they serve (BERT-A/R and BERT-A^d: position
//       table rows 0..max_positions-1; TUPE: table rows of positions t >= 1, i.e. rows t + 1 with the
//       [CLS] untie, rows t without) for the probes of Wang & Chen (2020). Not written for RoPE,
//       ALiBi and NoPE, which learn no position vectors: their probe table says so.
//   curves.csv  step,loss,lr,validation_loss from the metrics JSONL (empty = not logged).
//   mlm_by_position.csv  with validation shards: the masked-LM loss and accuracy per position
//       bucket (mlm_by_position.h), also printed as a table after the probes.
//   mlm_by_length.csv  with length shards: the loss and accuracy of each set of shards (the
//       same text at other sequence lengths), or why a set was not scored; also printed.
//   analyze_plots.py  the built-in script that drew the rest (unless --script names another).
//   analysis.json  what was written, the variant, and the plot/probe outputs of the script:
//       positional_heads.png, word_to_position.png (BERT-A, BERT-A^d), probes.csv, probes.md,
//       curves.png.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

namespace tupe::analyze {

struct AnalyzeOptions {
  std::filesystem::path checkpoint;  ///< step_XXXXXXXX folder or a checkpoint.dir (newest whole one)
  std::filesystem::path output;      ///< folder (created; existing files of the same names replaced)
  std::filesystem::path metrics;     ///< metrics JSONL; "" = <checkpoint.dir>/metrics/rank_0.jsonl if present
  int64_t heatmap_positions = 128;   ///< L of the heatmaps (capped at max_positions)
  std::string python;                ///< Python with numpy/scikit-learn/matplotlib ("" = $TUPE_PYTHON, else the configured one)
  std::string script;  ///< plotting script ("" = the built-in analyze_plots.py, written to the output folder)
  int64_t seed = 1;                  ///< probe train/test split and pair sampling
  std::string validation_shards;     ///< "" = no loss by position; else shards scored as the run validated
  int64_t eval_batches = -1;         ///< global batches of them scored (0 = all; -1 = the run's train.eval_batches)
  std::vector<std::string> length_shards;  ///< validation shard sets scored whole, one row each
};

/// Writes the numbers, then runs the plotting/probe script. Returns the probe table text
/// (probes.md). Throws ONE-line tupe::Error naming the file (checkpoint, metrics JSONL with its
/// line number, script) and the cause; a failing script is an error with its exit status.
std::string analyze_checkpoint(const AnalyzeOptions& options);

/// Parses metrics JSONL records ("step", "loss", "lr", "validation_loss"; other keys ignored)
/// into CSV text "step,loss,lr,validation_loss". Throws "<path>:<line>: ..." on a line that is
/// not a JSON object or has a non-numeric "step".
std::string metrics_jsonl_to_csv(const std::filesystem::path& path);

}  // namespace tupe::analyze
