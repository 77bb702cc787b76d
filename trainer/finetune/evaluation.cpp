#include "trainer/finetune/evaluation.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <algorithm>

#include "common/error.h"
#include "trainer/autocast.h"

namespace tupe::finetune {

at::Tensor predict_outputs(model::TupeBertImpl& model, const EncodedSplit& split, dist::Communicator& comm,
                           const InferenceSettings& settings) {
  const int64_t n = static_cast<int64_t>(split.size());
  const int64_t outputs = model.sentence_head->num_labels;
  const int rank = comm.rank(), world = comm.world_size();
  std::vector<int64_t> mine;
  for (int64_t i = rank; i < n; i += world) mine.push_back(i);
  std::stable_sort(mine.begin(), mine.end(), [&](int64_t a, int64_t b) {
    return split.ids[static_cast<size_t>(a)].size() > split.ids[static_cast<size_t>(b)].size();
  });
  const bool was_training = model.is_training();
  model.eval();
  at::Tensor all = at::zeros({n, outputs}, at::TensorOptions().dtype(at::kFloat).device(settings.device));
  {
    c10::NoGradGuard no_grad;
    for (size_t begin = 0; begin < mine.size(); begin += static_cast<size_t>(settings.batch_rows)) {
      const size_t end = std::min(mine.size(), begin + static_cast<size_t>(settings.batch_rows));
      std::vector<int64_t> rows(mine.begin() + static_cast<std::ptrdiff_t>(begin),
                                mine.begin() + static_cast<std::ptrdiff_t>(end));
      TaskBatch batch = make_batch(split, rows, settings.pad_id, settings.segments, settings.device);
      at::Tensor out;
      {
        trainer::AutocastScope autocast(settings.device.type(), settings.autocast_dtype);
        out = model.sentence_logits(batch.input_ids, batch.attention_mask, batch.segment_ids);
      }
      at::Tensor index = at::tensor(rows, at::kLong).to(settings.device);
      all.index_copy_(0, index, out.to(at::kFloat));
    }
  }
  if (was_training) model.train();
  comm.all_reduce({all}, "glue predict " + split.name)->wait();
  return all.cpu();
}

Predictions to_predictions(const TaskSpec& task, const at::Tensor& outputs) {
  Predictions p;
  const at::Tensor cpu = outputs.to(at::kCPU).to(at::kDouble).contiguous();
  const int64_t n = cpu.size(0);
  if (task.kind == TaskKind::kRegression) {
    const double* v = cpu.data_ptr<double>();
    const int64_t stride = cpu.size(1);
    for (int64_t i = 0; i < n; ++i) p.scores.push_back(v[i * stride]);
  } else {
    const at::Tensor argmax = cpu.argmax(1).contiguous();
    const int64_t* v = argmax.data_ptr<int64_t>();
    p.labels.assign(v, v + n);
  }
  return p;
}

MetricValues score_predictions(const TaskSpec& task, const Predictions& predicted, const EncodedSplit& split) {
  if (task.kind == TaskKind::kRegression) {
    TUPE_CHECK(split.scores.size() == split.size(), task.name << " " << split.name << ": the split has no gold scores");
    return regression_metrics(predicted.scores, split.scores);
  }
  TUPE_CHECK(split.labels.size() == split.size(), task.name << " " << split.name << ": the split has no gold labels");
  return classification_metrics(task, predicted.labels, split.labels);
}

}  // namespace tupe::finetune
