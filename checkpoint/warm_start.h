// A new run's model from weights it did not train: `tupe pretrain --init-from PATH`
// (train.init_from; docs/warm-start.md). The source is any ModelCheckpoint (a tupe
// checkpoint or a Hugging Face BERT folder, model_checkpoint.h).
//
// The model's shape is the source's. What a run may change, and how the weights follow:
//   model.max_positions larger  -> every position table grows: trained rows are kept, a new
//                                  position t copies trained position t mod L_src (Longformer's
//                                  copy of the trained table, Beltagy et al. 2020, Sec. 5).
//                                  BERT-A/R's input table: row t = position t. TUPE's table with
//                                  the [CLS] untie: row 0 (theta_1) kept, position t at row t + 1.
//                                  The T5 relative bias has no position rows: its buckets reach
//                                  relative_max_distance whatever L, and longer distances share
//                                  the outer bucket (T5), so it is copied as it is.
//   position_encoding           -> BERT-A source continued as TUPE-A / TUPE-R (the retrofit),
//   bert-absolute -> tupe-*,       or as BERT-R; see retrofit rule below.
//   bert-relative
//   dropouts, init_std          -> this run's when it sets them, else the source's.
// Anything else that differs from the source (a size, the LayerNorm placement, eps, the [CLS]
// untie or the buckets of a source that has them, a shorter max_positions) is refused, naming
// the key, both values and the source.
//
// Retrofit (BERT-A -> TUPE-A/R), with s = sqrt(2) and layer 0's W^Q, b^Q, W^K, b^K:
//   words, segments, their LayerNorm, every layer, the MLM head: copied;
//   every layer's W^Q, b^Q: times s, so that q k^T / sqrt(2 d_h) (TUPE's scale, Eq. 10) is
//     BERT's q k^T / sqrt(d_h) for the word term;
//   TUPE's table p: row t + 1 = BERT's position row t, row 0 (theta_1, with the untie) = BERT's
//     row 0 (the [CLS] position); without the untie, row t = row t;
//   TUPE's LN over p: the embedding LayerNorm's gamma, beta;
//   U^Q, c^Q = s W^Q_0, s b^Q_0 and U^K, c^K = W^K_0, b^K_0: P starts as BERT-A's own layer-0
//     position-position logits (LN(p) W^Q_0 + b^Q_0)(LN(p) W^K_0 + b^K_0)^T / sqrt(d_h);
//   the T5 relative bias (TUPE-R): zero.
// What it cannot keep: BERT-A's input held w + p under ONE LayerNorm and its values carried p;
// TUPE's input is words only, so the word-position cross terms of the logits and the positions
// in the values are gone (docs/model.md "The retrofit"). BERT-A -> BERT-R keeps the function
// exactly (the relative bias starts at zero).
//
// A source without an MLM head (BertModel, a fine-tuned model) gets a fresh one: the dense
// and LayerNorm at their init (N(0, init_std), ones, zeros), the decoder tied to the word
// embedding, the bias zero. A fine-tuned source's sentence head and an HF pooler are left out.
#pragma once
#include <string>
#include <vector>

#include "checkpoint/model_checkpoint.h"
#include "common/config_fields.h"
#include "model/config.h"
#include "model/tupe_bert.h"

namespace tupe::checkpoint {

/// How the new run's model follows its source.
struct WarmStartPlan {
  model::ModelOptions config;         ///< the new run's model (the source's shape + the allowed changes)
  model::ModelOptions source_config;  ///< the source's
  bool retrofit = false;              ///< position_encoding changed (bert-absolute -> tupe-* / bert-relative)
  bool extended = false;              ///< max_positions grew
  /// Lines for the user: what was carried over, extended, converted or initialised fresh.
  std::vector<std::string> notes;
};

/// The new run's model options: the source's, with the run's allowed changes (see the top).
/// `requested`: the run's [model] section; `given`: "model.<key>" -> where it was set (the
/// command line or a config file), keys not there are the run's defaults and take the
/// source's value; model.vocab_size 0 means "the source's". Throws ONE-line tupe::Error
/// "model.<key>: <value> (<where>) contradicts the source's <value> (<source>); ...".
WarmStartPlan plan_warm_start(const ModelCheckpoint& source, const model::ModelOptions& requested,
                              const KeyValues& given);

/// Copies the source's weights into `net` (built with plan.config) by the rules above, in
/// place, under NoGradGuard. Every parameter of `net` is either taken from the source or
/// listed as fresh in the plan's notes (the MLM head of a headless source, the retrofit's
/// relative bias). Throws tupe::Error naming the source's weights file and the tensor for a
/// tensor the plan did not expect (missing, extra or mis-shaped).
void load_warm_start(model::TupeBertImpl& net, const ModelCheckpoint& source, const WarmStartPlan& plan);

/// Rows of a position table grown from `trained` (rows_src, d) to `rows` rows: rows
/// [0, first_position_row) are kept, and the row of position t (row first_position_row + t)
/// copies position t mod L_src, L_src = rows_src - first_position_row (Longformer's copy).
/// Returns (rows, d) in trained's dtype. Throws tupe::Error when rows < rows_src.
at::Tensor extend_position_rows(const at::Tensor& trained, int64_t rows, int64_t first_position_row);

}  // namespace tupe::checkpoint
