// The training loop of pre-training (pretrain_job.h): steps, log lines and metrics,
// validation, checkpoints, and the SIGTERM/SIGUSR1 stop.
#include <ATen/ATen.h>

#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <sstream>

#include "common/error.h"
#include "common/log.h"
#include "dist/small_collectives.h"
#include "dist/trace.h"
#include "trainer/autocast.h"
#include "trainer/host_sync_counter.h"
#include "trainer/pretrain/flops.h"
#include "trainer/pretrain/pretrain_job.h"
#include "trainer/pretrain/step_trace.h"

namespace tupe::pretrain {

namespace {

// Set by the signal handler, read at step boundaries (the only process-wide state: a
// signal handler can reach nothing else).
volatile std::sig_atomic_t g_checkpoint_signal = 0;

extern "C" void on_checkpoint_signal(int) { g_checkpoint_signal = 1; }

using Clock = std::chrono::steady_clock;

/// What one validation measured over all ranks.
struct Validation {
  double loss = 0;      ///< mean CE per masked token (nats)
  double accuracy = 0;  ///< fraction of masked tokens whose argmax is the original id
};

/// Validation over the held-out split: (sum of CE, correct argmaxes, masked tokens) over all
/// ranks (step.h's masked_lm_eval_sums). Batches come pinned on CUDA (the resolved loader
/// config) and the sums stay on the device: one host sync per evaluation, in the final
/// all-reduce.
Validation evaluate(PretrainJob& job) {
  const PretrainConfig& cfg = job.cfg;
  data_pipeline::EvalIterator it(job.validation_data, job.loader_config, job.rank, job.world, job.word_boundaries);
  job.net->eval();
  at::Tensor sums = at::zeros({3}, at::TensorOptions().dtype(at::kDouble).device(job.device()));  // CE, correct, count
  double count = 0;
  {
    at::NoGradGuard no_grad;
    const auto amp = trainer::autocast_dtype(job.precision);
    for (int64_t s = 0; cfg.train.eval_batches == 0 || s < cfg.train.eval_batches; ++s) {
      auto b = it.next();
      if (!b) break;
      if (b->rows() == 0 || b->masked_positions.numel() == 0) continue;
      const data_pipeline::MlmBatch d = data_pipeline::to_device(*b, job.device());
      sums.narrow(0, 0, 2).add_(masked_lm_eval_sums(*job.net, d, amp, job.device()));
      count += static_cast<double>(b->masked_positions.numel());
    }
  }
  job.net->train();
  sums[2].fill_(count);
  const std::vector<double> total = dist::all_reduce_sum(job.comm(), sums, "validation loss");
  TUPE_CHECK(total[2] > 0, "validation: the validation split has no masked tokens");
  return Validation{total[0] / total[2], total[1] / total[2]};
}

/// Rank 0 saves; every rank learns whether the save worked (one byte each).
void save_checkpoint(PretrainJob& job) {
  const dist::TraceRange range(dist::trace_names::kCheckpointSave);
  const checkpoint::TrainerState state = checkpoint_record(job);
  std::string error;
  if (job.rank == 0) {
    const Clock::time_point start = Clock::now();
    try {
      checkpoint::NamedTensors weights;
      for (auto& [n, t] : job.step->parameters()) weights.emplace_back(n, t.detach());
      job.store->save(
          checkpoint::CheckpointContents{weights, job.step->optimizer().state_dict(), state, job.vocab_bytes});
    } catch (const std::exception& e) {
      error = e.what();
    }
    char took[32];
    std::snprintf(took, sizeof took, "%.3f", std::chrono::duration<double>(Clock::now() - start).count());
    log::debug("checkpoint of step " + std::to_string(state.step) + ": " + took + " s to save" +
               (error.empty() ? "" : " (failed)"));
  }
  const std::vector<uint8_t> ok =
      dist::all_gather_value<uint8_t>(job.comm(), error.empty() ? 1 : 0, "checkpoint status");
  TUPE_CHECK(error.empty(), error);
  TUPE_CHECK(ok[0] == 1, "checkpoint: rank 0 failed to save step " << state.step << " (see rank 0's message)");
  job.result.last_checkpoint = checkpoint::CheckpointStore::checkpoint_path(job.cfg.checkpoint.dir, state.step);
  job.progress->message("checkpoint saved: " + job.result.last_checkpoint.string());
}

/// Steps and tokens since the last log line. Time spent in validation and checkpoint saves
/// is kept out of it (start moves forward by their duration), so tokens/s and MFU are the
/// training steps' own.
struct Window {
  explicit Window(double wait_s) : data_wait_start_s(wait_s) {}
  Clock::time_point start = Clock::now();
  int64_t steps = 0, tokens = 0;
  double data_wait_start_s = 0;  ///< the loader's wait_seconds() when the window began
};

/// A log step: the global loss (one all-reduce), the progress line and a metrics record.
/// The only step that reads the device (loss, norm, skips, scale, the exposed-sync events).
void log_step(PretrainJob& job, const data_pipeline::MlmBatch& batch, const trainer::StepResult& out, Window& window,
              trainer::HostSyncCounter& syncs) {
  const PretrainConfig& cfg = job.cfg;
  trainer::DynamicLossScaler& scaler = job.step->scaler();
  const int64_t step = job.step->step();
  scaler.check_divergence(step);
  // The step's own count (the all-reduced masked tokens) must be the loader's: a mismatch
  // means the loss was normalised by something else than the global batch. (Whole-word and
  // span masks: the loader cannot count other ranks' tokens, -1; the step's count stands.)
  const double global_masked = out.count.item<double>();
  TUPE_CHECK(batch.global_masked_count < 0 || global_masked == static_cast<double>(batch.global_masked_count),
             "step " << step << ": the ranks' micro-batches hold " << global_masked << " masked tokens, the loader's "
                     << "global batch " << batch.global_masked_count);
  const double local_loss_sum = out.loss_sum.item<double>();
  const double grad_norm = out.found_inf.item<float>() > 0 ? INFINITY : out.grad_norm.item<double>();
  const double global_loss =
      dist::all_reduce_sum(job.comm(), {local_loss_sum}, job.device(), "loss")[0] / global_masked;
  const double dt = std::chrono::duration<double>(Clock::now() - window.start).count();
  ProgressLine p;
  p.step = step;
  p.max_steps = job.max_steps;
  p.loss = global_loss;
  p.lr = out.lr;
  p.grad_norm = grad_norm;
  p.loss_scale = scaler.scale();
  p.tokens_per_s = static_cast<double>(window.tokens) / dt;
  p.eta_s = dt / static_cast<double>(window.steps) * static_cast<double>(job.max_steps - step);
  p.skipped = scaler.state().total_skips;
  const int64_t padded = batch.input_ids.size(1);
  const double flops_per_token =
      training_flops_per_token(cfg.model, padded, job.plan.micro_batch,
                               global_masked / static_cast<double>(cfg.data.global_batch_size * padded));
  if (job.peak_tflops > 0) p.mfu = flops_per_token * p.tokens_per_s / (job.peak_tflops * 1e12 * job.world);
  job.progress->update(p);
  const auto pos = job.loader->state();
  const double steps = static_cast<double>(window.steps);
  const double exposed_s = job.step->exposed_sync().take_seconds();  // host clock, or CUDA events (synced above)
  nlohmann::json record(
      {{"step", step},
       {"epoch", pos.epoch},
       {"consumed_samples", pos.consumed_samples},
       {"loss", global_loss},
       {"local_loss", local_loss_sum / std::max(1.0, static_cast<double>(batch.masked_positions.numel()))},
       {"lr", out.lr},
       {"grad_norm", std::isfinite(grad_norm) ? grad_norm : -1.0},
       {"loss_scale", scaler.scale()},
       {"tokens_per_s", p.tokens_per_s},
       {"step_time_s", dt / static_cast<double>(window.steps)},
       {"data_wait_fraction", dt > 0 ? (job.loader->wait_seconds() - window.data_wait_start_s) / dt : 0.0},
       {"skipped_steps", p.skipped},
       {"flops_per_token", flops_per_token},
       {"mfu", p.mfu >= 0 ? p.mfu : -1.0},
       {"mfu_peak_tflops", job.peak_tflops},
       {"mfu_peak_source", job.peak_source},
       {"exposed_allreduce_ms", 1000.0 * exposed_s / steps},
       {"exposed_allreduce_fraction", dt > 0 ? exposed_s / dt : 0.0}});
  if (syncs.available()) record["host_syncs_per_step"] = static_cast<double>(syncs.take()) / steps;
  job.metrics->write(record);
  job.result.last_loss = global_loss;
  job.result.last_logged_step = step;
  window = Window(job.loader->wait_seconds());
}

/// Validation every train.eval_every steps and at the last step.
void validate_if_due(PretrainJob& job) {
  const int64_t step = job.step->step();
  const int64_t every = job.cfg.train.eval_every;
  if (!job.validation_data || !((every > 0 && step % every == 0) || step == job.max_steps)) return;
  const Validation v = [&] {
    const dist::TraceRange range(dist::trace_names::kValidation);
    return evaluate(job);
  }();
  job.result.validation_loss = v.loss;
  job.result.validation_accuracy = v.accuracy;
  std::ostringstream msg;
  msg << "validation at step " << step << ": MLM loss " << v.loss << ", perplexity " << std::exp(v.loss)
      << ", masked-token accuracy " << v.accuracy;
  job.progress->message(msg.str());
  job.metrics->write({{"step", step},
                      {"validation_loss", v.loss},
                      {"validation_perplexity", std::exp(v.loss)},
                      {"validation_accuracy", v.accuracy}});
}

}  // namespace

void install_checkpoint_signal_handlers() {
  std::signal(SIGTERM, on_checkpoint_signal);
  std::signal(SIGUSR1, on_checkpoint_signal);
}

void train_loop(PretrainJob& job) {
  Window window(job.loader->wait_seconds());
  const auto amp = trainer::autocast_dtype(job.precision);
  StepTrace trace(profile_step_range(job.cfg.train.profile_steps), job.cfg.checkpoint.dir, job.rank, job.use_cuda);
  trainer::HostSyncCounter syncs(job.device());  // counts inside the steps only (not the log steps' reads)
  const auto trace_written = [&](const std::string& path) {
    if (!path.empty()) job.progress->message("trace written: " + path + " (and one per rank beside it)");
  };
  while (job.step->step() < job.max_steps) {
    const int64_t step = job.step->step() + 1;
    job.comm().set_step(step);
    if (dist::any_rank(job.comm(), g_checkpoint_signal != 0, "signal check")) {
      job.progress->message("signal received: checkpointing at step " + std::to_string(step - 1) + " and stopping");
      save_checkpoint(job);
      trace_written(trace.finish());
      job.result.stopped_by_signal = true;
      return;
    }
    const auto trace_start = Clock::now();
    trace.before_step(step);
    window.start += Clock::now() - trace_start;
    const data_pipeline::MlmBatch batch = [&] {
      const dist::TraceRange range(dist::trace_names::kDataWait);
      return job.loader->next();
    }();
    const trainer::StepResult out = [&] {
      const trainer::HostSyncCounter::Counting counting(syncs);
      return run_mlm_step(*job.step, *job.net, batch, job.plan, amp);
    }();
    ++window.steps;
    window.tokens += batch.input_ids.numel() * job.world;
    if (step % job.cfg.train.log_every == 0 || step == job.max_steps) log_step(job, batch, out, window, syncs);
    const auto side_start = Clock::now();
    validate_if_due(job);
    if (job.store->due(step) || step == job.max_steps) save_checkpoint(job);
    trace_written(trace.after_step(step));
    window.start += Clock::now() - side_start;
  }
}

}  // namespace tupe::pretrain
