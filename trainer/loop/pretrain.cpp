#include "trainer/loop/pretrain.h"

#include <ATen/ATen.h>

#include <chrono>
#include <cmath>
#include <csignal>
#include <cstring>
#include <memory>
#include <optional>
#include <sstream>

#include "common/error.h"
#include "data_pipeline/batch.h"
#include "data_pipeline/dataset.h"
#include "data_pipeline/loader.h"
#include "dist/agreement.h"
#include "dist/consistency.h"
#include "dist/context.h"
#include "dist/device.h"
#include "dist/ddp.h"
#include "model/tupe_bert.h"
#include "trainer/checkpoint_store.h"
#include "trainer/loop/batch_plan.h"
#include "trainer/loop/flops.h"
#include "trainer/loop/step.h"
#include "trainer/loop/autocast.h"
#include "trainer/loop/metrics.h"
#include "trainer/loss_scaler.h"
#include "trainer/lr_schedule.h"
#include "trainer/optimizer.h"
#include "trainer/rng_state.h"

namespace tupe::trainer {

namespace {

// Set by the signal handler, read at step boundaries (the only process-wide state: a
// signal handler can reach nothing else).
volatile std::sig_atomic_t g_checkpoint_signal = 0;

extern "C" void on_checkpoint_signal(int) { g_checkpoint_signal = 1; }

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

/// Per-step dropout seed from (seed, step, rank): SplitMix64 finaliser over the three.
uint64_t step_seed(int64_t seed, int64_t step, int rank) {
  uint64_t z = static_cast<uint64_t>(seed) * 0x9E3779B97F4A7C15ULL ^ static_cast<uint64_t>(step) * 0xBF58476D1CE4E5B9ULL ^
               static_cast<uint64_t>(rank + 1) * 0x94D049BB133111EBULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

/// Sums `values` over all ranks (a small host/device tensor through the communicator).
std::vector<double> all_reduce_sum(dist::Communicator& comm, const std::vector<double>& values,
                                   const c10::Device& device, const std::string& name) {
  at::Tensor t = at::tensor(values, at::kDouble).to(device);
  comm.all_reduce({t}, name)->wait();
  t = t.cpu();
  return std::vector<double>(t.data_ptr<double>(), t.data_ptr<double>() + t.numel());
}

/// True on every rank when any rank got a checkpoint signal (host all-gather, 1 byte each).
bool any_rank_signalled(dist::Communicator& comm) {
  std::vector<uint8_t> mine{static_cast<uint8_t>(g_checkpoint_signal ? 1 : 0)}, all;
  comm.all_gather_host(mine, all, "signal check")->wait();
  for (uint8_t v : all)
    if (v) return true;
  return false;
}

}  // namespace

void install_checkpoint_signal_handlers() {
  std::signal(SIGTERM, on_checkpoint_signal);
  std::signal(SIGUSR1, on_checkpoint_signal);
}

std::vector<std::string> resume_must_match_keys() {
  std::vector<std::string> keys;
  for (const auto& f : model::ModelConfig::fields().fields())
    if (f.name.find("dropout") == std::string::npos) keys.push_back("model." + f.name);
  for (const char* k : {"data.global_batch_size", "data.seed", "data.mask_probability", "data.replace_with_mask",
                        "data.replace_with_random", "optimizer.optimizer", "vocab_sha256"})
    keys.emplace_back(k);
  return keys;
}

namespace {

/// Validation MLM loss over the held-out split: (sum of CE, masked tokens) over all ranks.
double evaluate(model::TupeBertImpl& net, dist::Communicator& comm, const std::shared_ptr<const data::PretrainDataset>& ds,
                const PretrainConfig& cfg, int rank, int world, const c10::Device& device) {
  data::EvalIterator it(ds, cfg.data, rank, world);
  net.eval();
  double loss_sum = 0, count = 0;
  {
    at::NoGradGuard no_grad;
    const auto amp = amp_dtype(cfg.precision.precision);
    for (int64_t s = 0; cfg.train.eval_batches == 0 || s < cfg.train.eval_batches; ++s) {
      auto b = it.next();
      if (!b) break;
      if (b->rows() == 0 || b->masked_positions.numel() == 0) continue;
      data::Batch d = to_device(*b, device);
      loss_sum += masked_lm_loss_sum(net, d, amp, device).item<double>();
      count += static_cast<double>(b->masked_positions.numel());
    }
  }
  net.train();
  auto sums = all_reduce_sum(comm, {loss_sum, count}, device, "validation loss");
  TUPE_CHECK(sums[1] > 0, "validation: the validation split has no masked tokens");
  return sums[0] / sums[1];
}

}  // namespace

PretrainResult run_pretraining(const dist::MpiEnv& env, const PretrainConfig& cfg, const std::string& resume) {
  cfg.model.validate();
  cfg.data.validate();
  cfg.optimizer.validate();
  cfg.precision.validate();
  cfg.checkpoint.validate();
  cfg.dist.validate();
  cfg.train.validate();
  TUPE_CHECK(!cfg.data.train_shards.empty(), "data.train_shards: no training shards given");
  TUPE_CHECK(cfg.dist.grad_reduce == dist::GradReduce::kSum,
             "dist.grad_reduce: average would divide by the world size twice: the MLM loss is already divided by the "
             "global number of masked tokens, so gradients are summed (use sum)");
  if (cfg.train.threads > 0) at::set_num_threads(static_cast<int>(cfg.train.threads));
  const int rank = env.rank(), world = env.world_size();
  const int64_t max_steps = cfg.train.max_steps > 0 ? cfg.train.max_steps : cfg.optimizer.total_steps;

  // Every rank runs the same effective config (the first differing key is named).
  dist::require_agreement(env, "config check", dist::config_entries(cfg.effective));

  // ---- Device and communicator ----------------------------------------------------------
  const c10::Device chosen =
      dist::resolve_device(env, dist::parse_device_request(cfg.train.device, "train.device"), "train.device");
  const bool use_cuda = chosen.is_cuda();
  TUPE_CHECK(!(cfg.precision.precision == Precision::kFp16 && !use_cuda),
             "precision.precision: fp16 with loss scaling is for GPUs; use bf16 or fp32 on CPU");
  dist::DistContext dctx(env, cfg.dist, chosen);
  if (use_cuda) {  // TF32 tensor cores for fp32 matmuls (train.tf32)
    at::globalContext().setAllowTF32CuBLAS(cfg.train.tf32);
    at::globalContext().setAllowTF32CuDNN(cfg.train.tf32);
  }
  // Pinned batches and non-blocking copies on CUDA unless data.pin_memory says otherwise.
  data::LoaderConfig loader_config = cfg.data;
  loader_config.pin_memory = cfg.data.pins(use_cuda) ? data::PinMemory::kOn : data::PinMemory::kOff;
  dist::Communicator& comm = dctx.comm();
  const c10::Device device = dctx.device();
  Progress progress(cfg.train.progress && rank == 0, rank == 0);

  // ---- Data ------------------------------------------------------------------------------
  auto train_ds = data::open_pretrain_dataset(data::split_list(cfg.data.train_shards),
                                              cfg.data.dataset_options("train", cfg.train.vocab_sha256));
  std::shared_ptr<const data::PretrainDataset> valid_ds;
  if (!cfg.data.validation_shards.empty())
    valid_ds = data::open_pretrain_dataset(data::split_list(cfg.data.validation_shards),
                                           cfg.data.dataset_options("validation", train_ds->info().vocab_sha256));
  {  // every rank reads the same shards (relative paths, node-local copies)
    auto entries = data::describe_shards(train_ds->info(), "train");
    if (valid_ds)
      for (auto& e : data::describe_shards(valid_ds->info(), "validation")) entries.push_back(std::move(e));
    dist::require_agreement(env, "data check", entries);
  }
  const auto& info = train_ds->info();
  TUPE_CHECK(info.vocab_size == cfg.model.vocab_size,
             "model.vocab_size: " << cfg.model.vocab_size << " but the shards (" << info.files.front()
                                  << ") hold a vocabulary of " << info.vocab_size);
  TUPE_CHECK(info.max_seq_len <= cfg.model.max_positions,
             "model.max_positions: " << cfg.model.max_positions << " is shorter than the shards' sequences ("
                                     << info.max_seq_len << " tokens)");
  const BatchPlan plan =
      plan_batches(cfg.data.global_batch_size, world, cfg.train.micro_batch_size, cfg.train.max_micro_batch_size);
  const int64_t accumulation = plan.accumulation, micro_batch = plan.micro_batch;

  // ---- Model, optimizer, scaler; rank 0's init everywhere --------------------------------
  at::manual_seed(static_cast<uint64_t>(cfg.train.seed));
  model::TupeBert net(cfg.model);
  net->to(device);
  net->train();
  std::vector<dist::NamedParameter> params;
  for (auto& item : net->named_parameters()) params.push_back({item.key(), item.value()});
  dist::check_same_parameters(comm, params);
  dist::broadcast_tensors(comm, params, 0);
  StepRunner runner(*net, dctx, cfg, accumulation, micro_batch);
  const NamedTensors& named = runner.parameters();
  Optimizer* optimizer = &runner.optimizer();
  DynamicLossScaler& scaler = runner.scaler();
  CheckpointStore store(cfg.checkpoint);
  if (rank == 0) store.check_writable();  // now, not at the first save hours later

  // ---- Resume ----------------------------------------------------------------------------
  TrainerState state;
  state.config = cfg.effective;
  state.vocab_sha256 = info.vocab_sha256;
  state.world_size = world;
  std::optional<LoadedCheckpoint> loaded;
  std::string resumed_state_file;  // trainer_state.json of the checkpoint resumed from ("" = fresh)
  TUPE_CHECK(!resume.empty(), "--resume: empty; give auto, none or a checkpoint folder");
  if (resume == "auto") {
    std::vector<std::string> skipped;
    loaded = CheckpointStore::load_latest(cfg.checkpoint.dir, &skipped);
    for (const auto& why : skipped) progress.message("resume auto: skipping a damaged checkpoint: " + why);
    // Starting fresh would overwrite the damaged checkpoints: the user decides.
    TUPE_CHECK(loaded || skipped.empty(),
               "resume auto: none of the " << skipped.size() << " checkpoint(s) under " << cfg.checkpoint.dir
                                           << " loads (newest: " << skipped.front()
                                           << "); move them away to start fresh, or pass --resume PATH");
    if (!loaded) progress.message("resume auto: no checkpoint under " + cfg.checkpoint.dir + ": starting fresh");
  } else if (resume == "none") {
    // A fresh run in a folder holding another run's checkpoints would mix the two (retention
    // would delete this run's saves, --resume auto would continue the other run).
    const auto existing = CheckpointStore::whole_steps(cfg.checkpoint.dir);
    TUPE_CHECK(existing.empty(), "--resume none: checkpoint.dir " << cfg.checkpoint.dir << " already holds "
                                                                   << existing.size() << " checkpoint(s) (newest step "
                                                                   << existing.back()
                                                                   << "); use --resume auto to continue that run, "
                                                                      "or another checkpoint.dir");
  } else {
    loaded = LoadedCheckpoint{resume, CheckpointStore::load(resume)};
  }
  // Every rank read the checkpoint itself: they must have taken the same one.
  {
    const int64_t mine = loaded ? loaded->contents.state.step : -1;
    std::vector<uint8_t> bytes(sizeof(mine)), all;
    std::memcpy(bytes.data(), &mine, sizeof(mine));
    comm.all_gather_host(bytes, all, "resume step check")->wait();
    for (int r = 0; r < world; ++r) {
      int64_t theirs = 0;
      std::memcpy(&theirs, all.data() + r * sizeof(theirs), sizeof(theirs));
      TUPE_CHECK(theirs == mine, "resume: rank " << rank << " resumes at step " << mine << " but rank " << r
                                                 << " at step " << theirs << " (-1: fresh start); is the checkpoint "
                                                    "folder the same on every node?");
    }
  }
  if (loaded) {
    const std::filesystem::path from = loaded->dir;
    resumed_state_file = (from / "trainer_state.json").string();
    CheckpointContents& ck = loaded->contents;
    check_config_compatible(ck.state.compat_kv(), state.compat_kv(), resume_must_match_keys(), from.string());
    copy_named_tensors(named, ck.model, (from / "model.safetensors").string());
    for (const auto& [name, t] : named)  // a run never saves inf/NaN weights: steps with them are skipped
      TUPE_CHECK(at::isfinite(t).all().item<bool>(),
                 (from / "model.safetensors").string() << ": tensor '" << name << "' holds inf/NaN values");
    try {
      optimizer->load_state_dict(ck.optimizer);
    } catch (const Error& e) {
      TUPE_FAIL((from / "optimizer.safetensors").string() << ": " << e.what());
    }
    try {
      scaler.load_state(ck.state.loss_scaler);
    } catch (const Error& e) {
      TUPE_FAIL((from / "trainer_state.json").string() << ": " << e.what());
    }
    state.step = ck.state.step;
    state.scheduler_step = ck.state.scheduler_step;
    state.data = ck.state.data;
    std::ostringstream msg;
    msg << "resumed from " << from.string() << " at step " << state.step << " (epoch " << state.data.epoch
        << ", consumed samples " << state.data.consumed_samples << ", saved by " << ck.state.world_size
        << " ranks, now " << world << ")";
    progress.message(msg.str());
    loaded.reset();  // the host copy of weights and optimizer state is not needed any more
  }

  std::unique_ptr<data::Loader> loader;
  try {
    loader = std::make_unique<data::Loader>(train_ds, loader_config, rank, world,
                                            data::LoaderState{state.data.epoch, state.data.consumed_samples},
                                            [device] { dist::set_current_device(device); });
  } catch (const Error& e) {
    if (resumed_state_file.empty()) throw;
    TUPE_FAIL(resumed_state_file << ": its data position does not fit these shards: " << e.what());
  }
  MetricsLog metrics(cfg.train.metrics_dir.empty() ? cfg.checkpoint.dir + "/metrics" : cfg.train.metrics_dir, rank);
  const int64_t n_params = model::count_parameters(*net);
  // The MFU's peak: train.peak_tflops, else the GPU's datasheet figure, else measured (CPU).
  double peak_tflops = cfg.train.peak_tflops;
  std::string peak_source = "train.peak_tflops";
  if (peak_tflops <= 0 && use_cuda) {
    const std::string name = dist::cuda_device_name(device.index());
    peak_tflops = table_peak_tflops(name, cfg.precision.precision, cfg.train.tf32);
    peak_source = peak_tflops > 0 ? name + " datasheet" : "unknown GPU '" + name + "': set train.peak_tflops for MFU";
  } else if (peak_tflops <= 0) {
    peak_tflops = measure_cpu_peak_tflops();
    peak_source = "measured fp32 matmul rate of this rank";
  }
  {
    std::ostringstream msg;
    msg << "pre-training " << model::to_string(cfg.model.position_encoding) << " (" << n_params << " parameters) on "
        << world << " rank(s), " << device.str() << ", " << comm.backend_name() << " all-reduce in "
        << runner.ddp().num_buckets() << " bucket(s); global batch " << cfg.data.global_batch_size << " = " << world << " x "
        << accumulation << " x " << micro_batch << "; " << loader->steps_per_epoch()
        << " steps per epoch; precision " << to_string(cfg.precision.precision) << "; MFU peak "
        << (peak_tflops > 0 ? format_double(peak_tflops) + " TFLOP/s (" + peak_source + ")" : peak_source);
    progress.message(msg.str());
  }

  PretrainResult result;
  auto save_checkpoint = [&]() {
    state.loss_scaler = scaler.state();
    state.rng = capture_rng_states();
    const auto pos = loader->state();
    state.data = DataPosition{pos.epoch, pos.consumed_samples};
    std::string error;
    std::filesystem::path where;
    if (rank == 0) {
      try {
        NamedTensors weights;
        for (auto& [n, t] : named) weights.emplace_back(n, t.detach());
        where = store.save(CheckpointContents{weights, optimizer->state_dict(), state});
      } catch (const std::exception& e) {
        error = e.what();
      }
    }
    // Every rank learns whether rank 0's save worked (1 byte each, host all-gather).
    std::vector<uint8_t> ok{static_cast<uint8_t>(error.empty() ? 1 : 0)}, all;
    comm.all_gather_host(ok, all, "checkpoint status")->wait();
    TUPE_CHECK(error.empty(), error);
    TUPE_CHECK(all[0] == 1, "checkpoint: rank 0 failed to save step " << state.step << " (see rank 0's message)");
    result.last_checkpoint = CheckpointStore::checkpoint_path(cfg.checkpoint.dir, state.step);
    progress.message("checkpoint saved: " + result.last_checkpoint.string());
  };

  // ---- The loop ---------------------------------------------------------------------------
  auto window_start = Clock::now();
  int64_t window_steps = 0, window_tokens = 0;
  while (state.step < max_steps) {
    const int64_t step = state.step + 1;
    comm.set_step(step);
    if (any_rank_signalled(comm)) {
      progress.message("signal received: checkpointing at step " + std::to_string(state.step) + " and stopping");
      save_checkpoint();
      result.stopped_by_signal = true;
      break;
    }
    at::manual_seed(step_seed(cfg.train.seed, step, rank));
    const data::Batch batch = loader->next();
    const double global_masked = static_cast<double>(batch.global_masked_count);
    const StepResult out = runner.run(batch, step, state.scheduler_step);
    state.step = step;
    ++window_steps;
    window_tokens += batch.input_ids.numel() * world;

    if (step % cfg.train.log_every == 0 || step == max_steps) {
      // The log step is the only one that reads the device: loss, norm, skips, scale.
      scaler.check_divergence(step);
      const double local_loss_sum = out.loss_sum.item<double>();
      const double grad_norm = out.found_inf.item<float>() > 0 ? INFINITY : out.grad_norm.item<double>();
      const double lr = out.lr;
      const double global_loss = all_reduce_sum(comm, {local_loss_sum}, device, "loss")[0] / global_masked;
      const double dt = seconds_since(window_start);
      ProgressLine p;
      p.step = step;
      p.max_steps = max_steps;
      p.loss = global_loss;
      p.lr = lr;
      p.grad_norm = grad_norm;
      p.loss_scale = scaler.scale();
      p.tokens_per_s = window_tokens / dt;
      p.eta_s = dt / window_steps * static_cast<double>(max_steps - step);
      p.skipped = scaler.state().total_skips;
      const int64_t padded = batch.input_ids.size(1);
      const double flops_per_token = training_flops_per_token(
          cfg.model, padded, cfg.data.global_batch_size,
          global_masked / static_cast<double>(cfg.data.global_batch_size * padded));
      if (peak_tflops > 0) p.mfu = flops_per_token * p.tokens_per_s / (peak_tflops * 1e12 * world);
      progress.update(p);
      const auto pos = loader->state();
      metrics.write({{"step", step},
                     {"epoch", pos.epoch},
                     {"consumed_samples", pos.consumed_samples},
                     {"loss", global_loss},
                     {"local_loss", local_loss_sum / std::max(1.0, static_cast<double>(batch.masked_positions.numel()))},
                     {"lr", lr},
                     {"grad_norm", std::isfinite(grad_norm) ? grad_norm : -1.0},
                     {"loss_scale", scaler.scale()},
                     {"tokens_per_s", p.tokens_per_s},
                     {"step_time_s", dt / window_steps},
                     {"skipped_steps", p.skipped},
                     {"flops_per_token", flops_per_token},
                     {"mfu", p.mfu >= 0 ? p.mfu : -1.0}});
      result.last_loss = global_loss;
      result.last_logged_step = step;
      window_start = Clock::now();
      window_steps = window_tokens = 0;
    }
    if (valid_ds && ((cfg.train.eval_every > 0 && step % cfg.train.eval_every == 0) || step == max_steps)) {
      result.validation_loss = evaluate(*net, comm, valid_ds, cfg, rank, world, device);
      std::ostringstream msg;
      msg << "validation at step " << step << ": MLM loss " << result.validation_loss << ", perplexity "
          << std::exp(result.validation_loss);
      progress.message(msg.str());
      metrics.write({{"step", step}, {"validation_loss", result.validation_loss},
                     {"validation_perplexity", std::exp(result.validation_loss)}});
    }
    if (store.due(step) || step == max_steps) save_checkpoint();
  }
  result.final_step = state.step;
  return result;
}

}  // namespace tupe::trainer
