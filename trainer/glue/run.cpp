#include "trainer/glue/run.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <optional>

#include "common/error.h"
#include "common/log.h"
#include "common/mix64.h"
#include "dist/consistency.h"
#include "dist/ddp.h"
#include "trainer/glue/pretrained.h"
#include "trainer/autocast.h"
#include "trainer/loss_scaler.h"
#include "trainer/lr_schedule.h"
#include "trainer/optimizer.h"
#include "trainer/optimizer_step.h"

namespace tupe::glue {

namespace {

using Clock = std::chrono::steady_clock;

/// Purposes of the seeds derived from a run's seed (hashed with common/mix64.h's hash_words).
constexpr uint64_t kInitStream = 1, kOrderStream = 2, kDropoutStream = 3;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

trainer::NamedTensors snapshot(const trainer::NamedTensors& params) {
  trainer::NamedTensors copy;
  copy.reserve(params.size());
  for (const auto& [name, t] : params) copy.emplace_back(name, t.is_cpu() ? t.detach().clone() : t.detach().cpu());
  return copy;
}

/// Sum of `values` over ranks (one all-reduce of a float64 tensor on the rank's device).
std::vector<double> sum_over_ranks(dist::Communicator& comm, const c10::Device& device, std::vector<double> values,
                                   const std::string& name) {
  at::Tensor t = at::tensor(values, at::kDouble).to(device);
  comm.all_reduce({t}, name)->wait();
  t = t.cpu();
  for (size_t i = 0; i < values.size(); ++i) values[i] = t[static_cast<int64_t>(i)].item<double>();
  return values;
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

}  // namespace

int64_t steps_per_epoch(int64_t rows, int64_t batch_size) {
  TUPE_CHECK(rows > 0 && batch_size > 0, "steps_per_epoch: rows " << rows << " and batch " << batch_size);
  return (rows + batch_size - 1) / batch_size;
}

RunRecord run_finetuning(const RunEnvironment& env, const TaskData& data, double lr, int64_t seed, int64_t epochs,
                         bool keep_weights) {
  const auto t0 = Clock::now();
  TUPE_CHECK(env.dist && env.config && env.encoder && data.task, "run_finetuning: incomplete environment");
  dist::Communicator& comm = env.dist->comm();
  const c10::Device device = env.dist->device();
  const TaskSpec& task = *data.task;
  const FinetuneConfig& cfg = *env.config;
  const int rank = comm.rank(), world = comm.world_size();
  const int64_t n_train = static_cast<int64_t>(data.train.size());
  TUPE_CHECK(epochs > 0, task.name << ": epochs must be positive, got " << epochs);

  RunRecord rec;
  rec.lr = lr;
  rec.seed = seed;
  rec.epochs = epochs;
  rec.steps_per_epoch = steps_per_epoch(n_train, cfg.batch_size);
  rec.total_steps = epochs * rec.steps_per_epoch;
  rec.warmup_steps = std::llround(cfg.warmup_ratio * static_cast<double>(rec.total_steps));

  // The model: a fresh sentence head from the seed, the checkpoint's encoder (strict).
  at::manual_seed(hash_words({static_cast<uint64_t>(seed), kInitStream, 0}));
  model::TupeBert net(env.model_config, task.num_outputs());
  load_encoder_strict(*net, *env.encoder, env.encoder_where);
  net->to(device);
  for (auto& p : net->mlm_head->parameters()) p.set_requires_grad(false);
  net->train();
  const trainer::NamedTensors params = finetuned_parameters(*net);
  std::vector<dist::NamedParameter> dist_params, head;
  for (const auto& [name, t] : params) {
    dist_params.push_back({name, t});
    if (name.rfind("sentence_head.", 0) == 0) head.push_back({name, t});
  }
  dist::check_same_parameters(comm, dist_params);
  dist::broadcast_tensors(comm, head, 0);

  dist::DistOptions dist_options = env.dist_options;
  dist_options.grad_reduce = dist::GradReduce::kSum;  // the loss is already divided by the global batch
  dist_options.grad_scale = 1.0;
  dist::DistributedDataParallel ddp(comm, dist_params, dist_options);

  trainer::OptimizerOptions opt;
  opt.optimizer = trainer::OptimizerKind::kAdamW;
  opt.lr = lr;
  opt.beta1 = cfg.beta1;
  opt.beta2 = cfg.beta2;
  opt.eps = cfg.eps;
  opt.weight_decay = cfg.weight_decay;
  opt.warmup_steps = rec.warmup_steps;
  opt.total_steps = rec.total_steps;
  opt.clip_grad_norm = cfg.clip_grad_norm;
  trainer::AdamW optimizer(params, opt);
  const trainer::LrSchedule schedule(opt);
  trainer::PrecisionOptions precision;
  precision.precision = env.inference.autocast_dtype == at::kBFloat16 ? trainer::Precision::kBf16
                                                                       : trainer::Precision::kFp32;
  trainer::DynamicLossScaler scaler(precision);
  scaler.to(device);
  trainer::OptimizerStep optimizer_step(optimizer, scaler, schedule, cfg.clip_grad_norm);
  const at::ScalarType autocast_dtype = env.inference.autocast_dtype;
  const bool classification = task.kind == TaskKind::kClassification;
  const bool need_weights = keep_weights || !data.test.empty();

  trainer::NamedTensors best_weights;
  double best_score = -INFINITY;
  int64_t step = 0;
  auto last_log = Clock::now();
  for (int64_t epoch = 1; epoch <= epochs; ++epoch) {
    const std::vector<int64_t> order =
        permutation(n_train, hash_words({static_cast<uint64_t>(seed), kOrderStream, static_cast<uint64_t>(epoch)}));
    at::Tensor loss_sum = at::zeros({}, at::TensorOptions().dtype(at::kDouble).device(device));  // read once per epoch
    double lr_now = 0;
    for (int64_t k = 0; k < rec.steps_per_epoch; ++k) {
      ++step;
      comm.set_step(step);
      const int64_t begin = k * cfg.batch_size, end = std::min(n_train, begin + cfg.batch_size);
      const int64_t n_global = end - begin;
      std::vector<int64_t> mine;
      for (int64_t i = begin + rank; i < end; i += world) mine.push_back(order[static_cast<size_t>(i)]);
      const bool dummy = mine.empty();
      if (dummy) mine.push_back(order[static_cast<size_t>(begin)]);
      const size_t micro = cfg.micro_batch_size > 0 ? static_cast<size_t>(cfg.micro_batch_size) : mine.size();
      const size_t num_micro = (mine.size() + micro - 1) / micro;

      ddp.zero_grad_buffer();
      for (size_t m = 0; m < num_micro; ++m) {
        std::optional<dist::NoSyncScope> no_sync;
        if (m + 1 < num_micro) no_sync.emplace(ddp);
        at::manual_seed(hash_words({static_cast<uint64_t>(seed) ^ (kDropoutStream << 56), static_cast<uint64_t>(step),
                                    static_cast<uint64_t>(rank) * 1000003ull + m}));
        const std::vector<int64_t> rows(mine.begin() + static_cast<std::ptrdiff_t>(m * micro),
                                        mine.begin() + static_cast<std::ptrdiff_t>(std::min(mine.size(), (m + 1) * micro)));
        const Batch batch = make_batch(data.train, rows, env.inference.pad_id, env.inference.segments, device);
        at::Tensor out;
        {
          trainer::AutocastScope autocast(device.type(), autocast_dtype);
          out = net->sentence_logits(batch.input_ids, batch.attention_mask, batch.segment_ids);
        }
        out = out.to(at::kFloat);
        const at::Tensor example_loss_sum =
            classification ? at::cross_entropy_loss(out, batch.labels, {}, at::Reduction::Sum)
                           : (out.squeeze(1) - batch.scores).pow(2).sum();
        const at::Tensor loss = example_loss_sum * ((dummy ? 0.0 : 1.0) / static_cast<double>(n_global));
        loss.backward();
        if (!dummy) loss_sum.add_(example_loss_sum.detach());
      }
      ddp.finish_grad_sync();
      lr_now = optimizer_step.apply(ddp.buffer().data(), step).lr;  // shared with pre-training
      if (seconds_since(last_log) > 60.0) {
        last_log = Clock::now();
        char buf[160];
        std::snprintf(buf, sizeof buf, "%s lr %g seed %lld: epoch %lld/%lld, step %lld/%lld", task.name.c_str(), lr,
                      static_cast<long long>(seed), static_cast<long long>(epoch), static_cast<long long>(epochs),
                      static_cast<long long>(step), static_cast<long long>(rec.total_steps));
        log::info(buf);
      }
    }

    EpochRecord er;
    er.epoch = epoch;
    er.step = step;
    er.learning_rate = lr_now;
    scaler.check_divergence(step);
    er.train_loss =
        sum_over_ranks(comm, device, {loss_sum.item<double>()}, "glue train loss")[0] / static_cast<double>(n_train);
    for (const auto& split : data.dev) {
      const at::Tensor outputs = predict_outputs(*net, split, comm, env.inference);
      er.dev.push_back(score_predictions(task, to_predictions(task, outputs), split));
    }
    er.score = er.dev.at(0).at(task.primary_metric);
    {
      char buf[128];
      std::snprintf(buf, sizeof buf, "%s lr %g seed %lld epoch %lld/%lld: train loss %.4f, ", task.name.c_str(), lr,
                    static_cast<long long>(seed), static_cast<long long>(epoch), static_cast<long long>(epochs),
                    er.train_loss);
      log::info(buf + metrics_text(task, er.dev) + " (" + std::to_string(static_cast<int>(seconds_since(t0))) + " s)");
    }
    const bool improved = cfg.select_epoch == SelectEpoch::kLast || er.score > best_score;
    if (improved) {
      best_score = er.score;
      rec.selected_epoch = epoch;
      rec.score = er.score;
      rec.selected = er.dev;
      if (need_weights && epoch < epochs) best_weights = snapshot(params);
    }
    rec.history.push_back(std::move(er));
  }

  // The selected epoch's weights back in place for the test predictions.
  if (rec.selected_epoch != epochs && !best_weights.empty()) {
    c10::NoGradGuard no_grad;
    for (size_t i = 0; i < params.size(); ++i) params[i].second.copy_(best_weights[i].second);
  }
  for (const auto& split : data.test)
    rec.test.push_back(to_predictions(task, predict_outputs(*net, split, comm, env.inference)));
  if (keep_weights) rec.weights = rec.selected_epoch != epochs ? std::move(best_weights) : snapshot(params);
  rec.skipped_steps = scaler.state().total_skips;
  rec.seconds = seconds_since(t0);
  return rec;
}

}  // namespace tupe::glue
