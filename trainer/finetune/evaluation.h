// Data-parallel inference of the sentence head on an encoded split, and the GLUE metrics of
// the result. Rank r takes the examples r, r + W, r + 2W, ... (sorted by length within the
// rank for tight padding), writes its outputs into its rows of an (N, C) zero tensor, and one
// all-reduce (sum) gives every rank all N outputs; so the result does not depend on W.
#pragma once
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <vector>

#include "dist/communicator.h"
#include "model/tupe_bert.h"
#include "trainer/finetune/encoding.h"
#include "trainer/finetune/metrics.h"
#include "trainer/finetune/tasks/tasks.h"

namespace tupe::finetune {

/// How inference runs on this rank.
struct InferenceSettings {
  c10::Device device = c10::Device(c10::kCPU);
  at::ScalarType autocast_dtype = at::kFloat;  ///< kBFloat16 / kHalf: bf16 / fp16 autocast; kFloat: fp32
  int32_t pad_id = 0;                          ///< [PAD]
  bool segments = false;                       ///< feed segment ids (model.type_vocab_size > 0)
  int64_t batch_rows = 64;                     ///< examples per forward on this rank
};

/// Sentence-head outputs (N, C) float32 on the CPU for every example of `split`, identical
/// on every rank. Runs the model in eval mode (no dropout) under NoGradGuard and restores
/// its training flag. Collective: every rank calls it with the same split.
at::Tensor predict_outputs(model::TupeBertImpl& model, const EncodedSplit& split, dist::Communicator& comm,
                           const InferenceSettings& settings);

/// Predictions from outputs: argmax label ids (classification) or the single output (regression).
struct Predictions {
  std::vector<int64_t> labels;  ///< classification: label id per example
  std::vector<double> scores;   ///< regression: predicted score per example
};
Predictions to_predictions(const TaskSpec& task, const at::Tensor& outputs);

/// The task's metrics (metrics.h) of `predicted` against the gold targets of `split`.
/// Throws tupe::Error when the split is unlabelled.
MetricValues score_predictions(const TaskSpec& task, const Predictions& predicted, const EncodedSplit& split);

}  // namespace tupe::finetune
