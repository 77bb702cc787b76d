#include "trainer/finetune/run.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>

#include "checkpoint/model_checkpoint.h"
#include "common/error.h"
#include "common/log.h"
#include "common/mix64.h"
#include "dist/consistency.h"
#include "dist/small_collectives.h"
#include "metrics/event_file.h"
#include "trainer/autocast.h"
#include "trainer/finetune/saved_model.h"
#include "trainer/train_step.h"

namespace tupe::finetune {

namespace {

using Clock = std::chrono::steady_clock;

/// Purposes of the seeds derived from a run's seed (hashed with common/mix64.h's hash_words).
constexpr uint64_t kInitStream = 1, kOrderStream = 2, kDropoutStream = 3;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

checkpoint::NamedTensors snapshot(const checkpoint::NamedTensors& params) {
  checkpoint::NamedTensors copy;
  copy.reserve(params.size());
  for (const auto& [name, t] : params) copy.emplace_back(name, t.is_cpu() ? t.detach().clone() : t.detach().cpu());
  return copy;
}

std::string metrics_text(const TaskSpec& task, const std::vector<MetricValues>& dev) {
  std::string out;
  char buf[64];
  for (size_t s = 0; s < dev.size(); ++s) {
    for (const auto& [name, value] : dev[s]) {
      std::snprintf(buf, sizeof buf, "%s%s %s %.4f", out.empty() ? "" : ", ",
                    task.dev[s].table_column.c_str(), name.c_str(), value);
      out += buf;
    }
  }
  return out;
}

/// One run's state. run_finetuning reads top to bottom:
///   plan_run -> build_model -> build_step -> per epoch: train_epoch, evaluate_epoch,
///   keep_if_selected -> finish_run
/// Fields are declared in construction order (the step, which hooks the model's parameters,
/// goes before the model).
struct Run {
  Run(const RunEnvironment& e, const TaskData& d, double lr, int64_t seed, int64_t epochs, bool keep)
      : env(e), data(d), task(*d.task), cfg(*e.config), comm(e.dist->comm()), device(e.dist->device()),
        rank(comm.rank()), world(comm.world_size()), n_train(static_cast<int64_t>(d.train.size())),
        keep_weights(keep) {
    rec.lr = lr;
    rec.seed = seed;
    rec.epochs = epochs;
  }
  const RunEnvironment& env;
  const TaskData& data;
  const TaskSpec& task;
  const FinetuneOptions& cfg;
  dist::Communicator& comm;
  const c10::Device device;
  const int rank, world;
  const int64_t n_train;
  const bool keep_weights;
  const Clock::time_point start = Clock::now();
  RunRecord rec;
  // build_model
  model::TupeBert net{nullptr};
  checkpoint::NamedTensors params;  ///< what the step trains: every parameter but mlm_head.*
  // build_step
  std::unique_ptr<trainer::TrainStep> step;
  // keep_if_selected
  checkpoint::NamedTensors selected_weights;  ///< the selected epoch's, when it is not the last
  double best_score = -INFINITY;
  std::unique_ptr<metrics::EventFileWriter> tensorboard;  ///< rank 0's, when finetune.tensorboard
};

/// This run's TensorBoard folder, <output_dir>/tensorboard/<task>/lr<LR>_seed<seed>.
std::string tensorboard_dir(const Run& r) {
  char run[64];
  std::snprintf(run, sizeof run, "lr%g_seed%lld", r.rec.lr, static_cast<long long>(r.rec.seed));
  return r.cfg.output_dir + "/tensorboard/" + r.task.name + "/" + run;
}

/// Steps and warm-up of the run (the LR rises over warmup_ratio of the steps).
void plan_run(Run& r) {
  TUPE_CHECK(r.rec.epochs > 0, r.task.name << ": epochs must be positive, got " << r.rec.epochs);
  r.rec.steps_per_epoch = steps_per_epoch(r.n_train, r.cfg.batch_size);
  r.rec.total_steps = r.rec.epochs * r.rec.steps_per_epoch;
  r.rec.warmup_steps = std::llround(r.cfg.warmup_ratio * static_cast<double>(r.rec.total_steps));
  if (r.rank == 0 && r.cfg.tensorboard) {
    if (metrics::tensorboard_built_in())
      r.tensorboard = std::make_unique<metrics::EventFileWriter>(tensorboard_dir(r));
    else
      log::debug("TensorBoard: not built in (configured with TUPE_TENSORBOARD=OFF); " + tensorboard_dir(r) + " not written");
  }
}

/// A fresh sentence head from the seed (rank 0's copy everywhere), the checkpoint's encoder
/// (strict); the MLM head is frozen (not trained, not synchronised).
void build_model(Run& r) {
  at::manual_seed(hash_words({static_cast<uint64_t>(r.rec.seed), kInitStream, 0}));
  r.net = model::TupeBert(r.env.model_config, r.task.num_outputs());
  checkpoint::load_encoder(*r.net, *r.env.encoder, r.env.encoder_where);
  if (r.env.pooler && !r.env.pooler->empty()) {  // an HF BERT's pooler: the head's dense layer (run.h)
    checkpoint::NamedTensors dense;
    for (const auto& item : r.net->sentence_head->dense->named_parameters())
      dense.emplace_back("sentence_head.dense." + item.key(), item.value());
    checkpoint::copy_named_tensors(dense, *r.env.pooler, r.env.encoder_where);
  }
  r.net->to(r.device);
  for (auto& p : r.net->mlm_head->parameters()) p.set_requires_grad(false);
  r.net->train();
  r.params = finetuned_parameters(*r.net);
  std::vector<dist::NamedParameter> all, head;
  for (const auto& [name, t] : r.params) {
    all.push_back({name, t});
    if (name.rfind("sentence_head.", 0) == 0) head.push_back({name, t});
  }
  dist::check_same_parameters(r.comm, all);
  dist::broadcast_tensors(r.comm, head, 0);
}

/// The training step: the [optimizer] section at this run's peak LR, warm-up and length (the
/// protocol's), the [precision] section's precision, summed gradients.
void build_step(Run& r) {
  trainer::TrainStepOptions o;
  o.optimizer = r.env.optimizer;
  o.optimizer.lr = r.rec.lr;
  o.optimizer.warmup_steps = r.rec.warmup_steps;
  o.optimizer.total_steps = r.rec.total_steps;
  o.optimizer.validate();
  o.precision = r.env.precision;
  o.dist = r.env.dist_options;
  o.seed = static_cast<int64_t>(hash_words({static_cast<uint64_t>(r.rec.seed), kDropoutStream}));
  r.step = std::make_unique<trainer::TrainStep>(r.params, r.comm, r.device, o);
  r.rec.optimizer = r.step->optimizer().kind();
}

/// Summed loss of some training rows: cross-entropy (classification) or squared error
/// (regression) of the sentence head, the forward under the run's autocast.
at::Tensor example_loss_sum(Run& r, const std::vector<int64_t>& rows) {
  const TaskBatch batch = make_batch(r.data.train, rows, r.env.inference.pad_id, r.env.inference.segments, r.device);
  at::Tensor out;
  {
    trainer::AutocastScope autocast(r.device.type(), r.env.inference.autocast_dtype);
    out = r.net->sentence_logits(batch.input_ids, batch.attention_mask, batch.segment_ids);
  }
  out = out.to(at::kFloat);
  if (r.task.kind == TaskKind::kClassification)
    return at::cross_entropy_loss(out, batch.labels, {}, at::Reduction::Sum);
  return (out.squeeze(1) - batch.scores).pow(2).sum();
}

/// One optimizer step over the global batch `k` of the epoch's `order`: this rank takes
/// examples r, r + W, ... of it, in micro-batches (none when r is past the batch's last
/// example: the step lets such a rank join without a forward). Adds this rank's summed loss
/// to `loss_sum` (on the device); returns the step's LR.
double train_batch(Run& r, const std::vector<int64_t>& order, int64_t k, at::Tensor& loss_sum) {
  const int64_t begin = k * r.cfg.batch_size, end = std::min(r.n_train, begin + r.cfg.batch_size);
  std::vector<int64_t> mine;
  for (int64_t i = begin + r.rank; i < end; i += r.world) mine.push_back(order[static_cast<size_t>(i)]);
  const size_t micro =
      r.cfg.micro_batch_size > 0 ? static_cast<size_t>(r.cfg.micro_batch_size) : std::max<size_t>(1, mine.size());
  const auto micro_batches = static_cast<int64_t>((mine.size() + micro - 1) / micro);
  const auto loss = [&](int64_t m) {
    const auto first = mine.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(m) * micro);
    const auto last =
        mine.begin() + static_cast<std::ptrdiff_t>(std::min(mine.size(), (static_cast<size_t>(m) + 1) * micro));
    const std::vector<int64_t> rows(first, last);
    return trainer::MicroBatchLoss{example_loss_sum(r, rows), static_cast<int64_t>(rows.size())};
  };
  r.comm.set_step(r.step->step() + 1);
  const trainer::StepResult out = r.step->run(micro_batches, loss);
  loss_sum.add_(out.loss_sum);
  return out.lr;
}

/// One epoch of optimizer steps in the order of (seed, epoch); its record carries the mean
/// training loss over all ranks. The steps never read the device; the epoch's end does,
/// twice: the loss scaler's divergence check and the loss's all-reduce.
EpochRecord train_epoch(Run& r, int64_t epoch) {
  const std::vector<int64_t> order =
      permutation(r.n_train, hash_words({static_cast<uint64_t>(r.rec.seed), kOrderStream, static_cast<uint64_t>(epoch)}));
  at::Tensor loss_sum = at::zeros({1}, at::TensorOptions().dtype(at::kDouble).device(r.device));
  EpochRecord er;
  er.epoch = epoch;
  auto last_log = Clock::now();
  for (int64_t k = 0; k < r.rec.steps_per_epoch; ++k) {
    er.learning_rate = train_batch(r, order, k, loss_sum);
    if (seconds_since(last_log) > 60.0) {
      last_log = Clock::now();
      char buf[160];
      std::snprintf(buf, sizeof buf, "%s lr %g seed %lld: epoch %lld/%lld, step %lld/%lld", r.task.name.c_str(),
                    r.rec.lr, static_cast<long long>(r.rec.seed), static_cast<long long>(epoch),
                    static_cast<long long>(r.rec.epochs), static_cast<long long>(r.step->step()),
                    static_cast<long long>(r.rec.total_steps));
      log::info(buf);
    }
  }
  er.step = r.step->step();
  r.step->scaler().check_divergence(er.step);
  er.train_loss = dist::all_reduce_sum(r.comm, loss_sum, "glue train loss")[0] / static_cast<double>(r.n_train);
  return er;
}

bool has_selection(const Run& r) { return r.data.selection.size() > 0; }

/// Rank 0's TensorBoard scalars at `epoch`: `scalars` and the dev metrics, "dev/<split>/<metric>".
void write_tensorboard(Run& r, int64_t epoch, const std::vector<MetricValues>& dev,
                       std::vector<std::pair<std::string, double>> scalars) {
  for (size_t s = 0; s < dev.size(); ++s)
    for (const auto& [metric, value] : dev[s]) scalars.emplace_back("dev/" + r.task.dev.at(s).name + "/" + metric, value);
  const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  r.tensorboard->write_scalars(epoch, now, scalars);
}

/// The task's metrics on every dev split with the weights in place (counted: with a
/// selection split a run scores the dev sets once).
std::vector<MetricValues> score_dev(Run& r) {
  std::vector<MetricValues> dev;
  for (const auto& split : r.data.dev) {
    const at::Tensor outputs = predict_outputs(*r.net, split, r.comm, r.env.inference);
    dev.push_back(score_predictions(r.task, to_predictions(r.task, outputs), split));
  }
  ++r.rec.dev_evaluations;
  return dev;
}

std::string selection_text(const MetricValues& m) {
  std::string out;
  char buf[64];
  for (const auto& [name, value] : m) {
    std::snprintf(buf, sizeof buf, "%sselection %s %.4f", out.empty() ? "" : ", ", name.c_str(), value);
    out += buf;
  }
  return out;
}

/// After an epoch: the metrics of the split that chooses (the selection split, else the dev
/// splits), and its log line.
void evaluate_epoch(Run& r, EpochRecord& er) {
  if (has_selection(r)) {
    const at::Tensor outputs = predict_outputs(*r.net, r.data.selection, r.comm, r.env.inference);
    er.selection = score_predictions(r.task, to_predictions(r.task, outputs), r.data.selection);
    er.score = er.selection.at(r.task.primary_metric);
  } else {
    er.dev = score_dev(r);
    er.score = er.dev.at(0).at(r.task.primary_metric);
  }
  char buf[128];
  std::snprintf(buf, sizeof buf, "%s lr %g seed %lld epoch %lld/%lld: train loss %.4f, ", r.task.name.c_str(), r.rec.lr,
                static_cast<long long>(r.rec.seed), static_cast<long long>(er.epoch),
                static_cast<long long>(r.rec.epochs), er.train_loss);
  log::info(buf + (has_selection(r) ? selection_text(er.selection) : metrics_text(r.task, er.dev)) + " (" +
            std::to_string(static_cast<int>(seconds_since(r.start))) + " s)");
  if (r.tensorboard) {
    std::vector<std::pair<std::string, double>> scalars{{"train/loss", er.train_loss},
                                                        {"train/learning_rate", er.learning_rate}};
    for (const auto& [metric, value] : er.selection) scalars.emplace_back("selection/" + metric, value);
    write_tensorboard(r, er.epoch, er.dev, std::move(scalars));
  }
}

/// Records the epoch; when it is the one to report (finetune.select_epoch: best so far, or
/// last), the run reports it, and its weights are kept if later epochs could replace them.
void keep_if_selected(Run& r, EpochRecord er) {
  if (r.cfg.select_epoch == SelectEpoch::kLast || er.score > r.best_score) {
    r.best_score = er.score;
    r.rec.selected_epoch = er.epoch;
    r.rec.selection_score = er.score;
    if (!has_selection(r)) {
      r.rec.score = er.score;
      r.rec.selected = er.dev;
    }
    // Kept only when a later epoch may not replace it (select_epoch = last always ends on the
    // weights in place) and something reads it: the saved model, the test predictions, or the
    // dev sets scored after the last epoch (a selection split).
    const bool need_weights = r.keep_weights || !r.data.test.empty() || has_selection(r);
    if (need_weights && r.cfg.select_epoch == SelectEpoch::kBest && er.epoch < r.rec.epochs)
      r.selected_weights = snapshot(r.params);
  }
  r.rec.history.push_back(std::move(er));
}

/// The selected epoch's weights back in place; with a selection split, the dev sets scored
/// (once, now); the test predictions; the weights to keep.
void finish_run(Run& r) {
  const bool selected_last = r.rec.selected_epoch == r.rec.epochs;
  if (!selected_last && !r.selected_weights.empty()) {
    c10::NoGradGuard no_grad;
    for (size_t i = 0; i < r.params.size(); ++i) r.params[i].second.copy_(r.selected_weights[i].second);
  }
  if (has_selection(r)) {
    r.rec.selected = score_dev(r);
    r.rec.score = r.rec.selected.at(0).at(r.task.primary_metric);
    if (r.tensorboard) write_tensorboard(r, r.rec.selected_epoch, r.rec.selected, {});  // the one dev score
    char buf[128];
    std::snprintf(buf, sizeof buf, "%s lr %g seed %lld: dev at the selection's epoch %lld: ", r.task.name.c_str(),
                  r.rec.lr, static_cast<long long>(r.rec.seed), static_cast<long long>(r.rec.selected_epoch));
    log::info(buf + metrics_text(r.task, r.rec.selected));
  }
  for (const auto& split : r.data.test)
    r.rec.test.push_back(to_predictions(r.task, predict_outputs(*r.net, split, r.comm, r.env.inference)));
  if (r.keep_weights) r.rec.weights = selected_last ? snapshot(r.params) : std::move(r.selected_weights);
  r.rec.skipped_steps = r.step->scaler().state().total_skips;
  r.rec.seconds = seconds_since(r.start);
}

}  // namespace

int64_t steps_per_epoch(int64_t rows, int64_t batch_size) {
  TUPE_CHECK(rows > 0 && batch_size > 0, "steps_per_epoch: rows " << rows << " and batch " << batch_size);
  return (rows + batch_size - 1) / batch_size;
}

RunRecord run_finetuning(const RunEnvironment& env, const TaskData& data, double lr, int64_t seed, int64_t epochs,
                         bool keep_weights) {
  TUPE_CHECK(env.dist && env.config && env.encoder && data.task, "run_finetuning: incomplete environment");
  Run r(env, data, lr, seed, epochs, keep_weights);
  plan_run(r);
  build_model(r);
  build_step(r);
  for (int64_t epoch = 1; epoch <= r.rec.epochs; ++epoch) {
    EpochRecord er = train_epoch(r, epoch);
    evaluate_epoch(r, er);
    keep_if_selected(r, std::move(er));
  }
  finish_run(r);
  return std::move(r.rec);
}

}  // namespace tupe::finetune
