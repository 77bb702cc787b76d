// run_pretraining and its setup phases (pretrain_job.h has the map of the job).
#include "trainer/pretrain/pretrain.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <sstream>

#include "common/build_info.h"
#include "common/error.h"
#include "common/log.h"
#include "data_pipeline/shard_verify.h"
#include "dist/consistency.h"
#include "dist/device.h"
#include "dist/folder_lock_agreed.h"
#include "dist/small_collectives.h"
#include "model/attention.h"
#include "trainer/autocast.h"
#include "trainer/pretrain/cpu_peak.h"
#include "trainer/pretrain/flops.h"
#include "trainer/pretrain/pretrain_job.h"

namespace tupe::pretrain {

std::vector<std::string> resume_must_match_keys() {
  std::vector<std::string> keys;
  for (const auto& f : model::ModelOptions::fields().fields())
    if (f.name.find("dropout") == std::string::npos) keys.push_back("model." + f.name);
  for (const char* k : {"data.global_batch_size", "data.seed", "data.mask_probability", "data.replace_with_mask",
                        "data.replace_with_random", "data.mask_strategy", "optimizer.optimizer",
                        "train.init_from_sha256", "vocab_sha256"})
    keys.emplace_back(k);
  return keys;
}

void check_config(const PretrainConfig& cfg) {
  // With train.init_from the [model] keys are what the run changes of the source's model: each
  // in its range here; the rules between keys hold for the merged model (checkpoint/warm_start.h).
  if (cfg.train.init_from.empty())
    cfg.model.validate();
  else
    model::ModelOptions::fields().check(cfg.model);
  cfg.data.validate();
  cfg.optimizer.validate();
  cfg.precision.validate();
  cfg.checkpoint.validate();
  cfg.dist.validate();
  cfg.train.validate();
  TUPE_CHECK(!cfg.data.train_shards.empty(), "data.train_shards: no training shards given");
}

void setup_device(PretrainJob& job) {
  const PretrainConfig& cfg = job.cfg;
  if (cfg.train.threads > 0) at::set_num_threads(static_cast<int>(cfg.train.threads));
  const c10::Device chosen = dist::resolve_device(job.env, cfg.train.device, "train.device");
  job.use_cuda = chosen.is_cuda();
  job.precision = trainer::resolve_precision(cfg.precision.precision, job.use_cuda,
                                             job.use_cuda && dist::cuda_bf16_supported(chosen.index()));
  job.context = std::make_unique<dist::DistContext>(job.env, cfg.dist, chosen);
  if (job.use_cuda) {  // TF32 tensor cores for fp32 matmuls (train.tf32)
    at::globalContext().setAllowTF32CuBLAS(cfg.train.tf32);
    at::globalContext().setAllowTF32CuDNN(cfg.train.tf32);
  }
  job.progress = std::make_unique<Progress>(cfg.train.progress && job.rank == 0);
  log::debug("host " + job.env.host_name() + ", local rank " + std::to_string(job.env.local_rank()) + ", device " +
             chosen.str() + ", " + job.comm().backend_name() + " communicator");
}

namespace {

/// data.verify_at_start: the train and validation shards checked as `tupe verify --shards`
/// does, each rank its share (file i to rank i mod W), the verdicts gathered through the
/// watched communicator. Damage: rank 0 prints the verify lines, and every rank ends the job
/// with the summary (tupe::AgreedError).
void verify_shards_at_start(PretrainJob& job) {
  const PretrainConfig& cfg = job.cfg;
  std::vector<std::string> files = data_pipeline::list_shard_files(split_comma_list(cfg.data.train_shards), "train");
  if (!cfg.data.validation_shards.empty())
    for (auto& f : data_pipeline::list_shard_files(split_comma_list(cfg.data.validation_shards), "validation"))
      files.push_back(std::move(f));
  const auto gather = [&job](const std::string& mine) {
    const auto sizes = dist::all_gather_value<int64_t>(job.comm(), static_cast<int64_t>(mine.size()), "verify sizes");
    const int64_t longest = *std::max_element(sizes.begin(), sizes.end());
    std::vector<uint8_t> local(static_cast<size_t>(longest), 0), all;
    std::copy(mine.begin(), mine.end(), local.begin());
    job.comm().all_gather_host(local, all, "verify verdicts")->wait();
    std::vector<std::string> out;
    for (size_t r = 0; r < sizes.size(); ++r)
      out.emplace_back(reinterpret_cast<const char*>(all.data()) + r * static_cast<size_t>(longest),
                       static_cast<size_t>(sizes[r]));
    return out;
  };
  const auto t0 = std::chrono::steady_clock::now();
  const data_pipeline::VerifyReport report = data_pipeline::verify_shard_set(files, job.rank, job.world, gather);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (report.damaged()) {
    for (const std::string& line : report.lines) log::info(line);
    throw AgreedError("data.verify_at_start: " + report.summary);
  }
  std::ostringstream os;
  os << report.summary << " (data.verify_at_start, " << s << " s)";
  log::info(os.str());
}

}  // namespace

void open_data(PretrainJob& job) {
  const PretrainConfig& cfg = job.cfg;
  if (cfg.data.verify_at_start) verify_shards_at_start(job);
  // Every rank opens the same shards: rank 0 alone says that some are read unverified.
  data_pipeline::DatasetOptions train_options = cfg.data.dataset_options("train", cfg.train.vocab_sha256);
  train_options.warn_unverified = job.rank == 0;
  job.train_data = data_pipeline::open_pretrain_dataset(split_comma_list(cfg.data.train_shards), train_options);
  if (!cfg.data.validation_shards.empty()) {
    data_pipeline::DatasetOptions validation_options =
        cfg.data.dataset_options("validation", job.train_data->info().vocab_sha256);
    validation_options.warn_unverified = job.rank == 0;
    job.validation_data =
        data_pipeline::open_pretrain_dataset(split_comma_list(cfg.data.validation_shards), validation_options);
  }
  // Every rank reads the same shards (relative paths, node-local copies).
  auto entries = data_pipeline::describe_shards(job.train_data->info(), "train");
  if (job.validation_data)
    for (auto& e : data_pipeline::describe_shards(job.validation_data->info(), "validation"))
      entries.push_back(std::move(e));
  dist::require_agreement(job.env, "data check", entries);
  const auto& info = job.train_data->info();
  check_source_data(job);
  if (cfg.model.vocab_size == 0) {  // the default: the shards know it (checkpoints record the value)
    job.cfg.model.vocab_size = info.vocab_size;
    job.cfg.effective["model.vocab_size"] = std::to_string(info.vocab_size);
  }
  TUPE_CHECK(info.vocab_size == cfg.model.vocab_size,
             "model.vocab_size: " << cfg.model.vocab_size << " but the shards (" << info.files.front()
                                  << ") hold a vocabulary of " << info.vocab_size << " (0 takes the shards')");
  TUPE_CHECK(info.max_seq_len <= cfg.model.max_positions,
             "model.max_positions: " << cfg.model.max_positions << " is shorter than the shards' sequences ("
                                     << info.max_seq_len << " tokens)");
  // Pinned batches and non-blocking copies on CUDA unless data.pin_memory says otherwise.
  job.loader_config = cfg.data;
  job.loader_config.pin_memory =
      cfg.data.pins(job.use_cuda) ? data_pipeline::PinMemory::kOn : data_pipeline::PinMemory::kOff;
  record_tokenizer(job);
  load_word_boundaries(job);
  job.plan =
      plan_batches(cfg.data.global_batch_size, job.world, cfg.train.micro_batch_size, cfg.train.max_micro_batch_size);
  log::debug("train data: " + std::to_string(job.train_data->size()) + " sequences in " +
             std::to_string(info.files.size()) + " shard(s), " +
             (cfg.data.load_in_memory ? "in memory" : "read on demand") + "; " + std::to_string(job.plan.accumulation) +
             " micro-batch(es) of " + std::to_string(job.plan.micro_batch) + " per step on this rank");
}

void build_model(PretrainJob& job) {
  const PretrainConfig& cfg = job.cfg;
  at::manual_seed(static_cast<uint64_t>(cfg.train.seed));
  job.net = model::TupeBert(cfg.model);
  if (job.source) {  // train.init_from: the source's weights over the fresh init (warm_start.h)
    checkpoint::load_warm_start(*job.net, *job.source, *job.warm);
    job.source.reset();  // its host copy is not needed again
  }
  job.net->to(job.device());
  job.net->train();
  std::vector<dist::NamedParameter> params;
  checkpoint::NamedTensors named;
  for (auto& item : job.net->named_parameters()) {
    params.push_back({item.key(), item.value()});
    named.emplace_back(item.key(), item.value());
  }
  dist::check_same_parameters(job.comm(), params);
  dist::broadcast_tensors(job.comm(), params, 0);  // rank 0's initial weights everywhere
  job.step = std::make_unique<trainer::TrainStep>(named, job.comm(), job.device(), step_options(cfg, job.precision));
  job.store = std::make_unique<checkpoint::CheckpointStore>(cfg.checkpoint);
  if (job.rank == 0) job.store->check_writable();  // now, not at the first save hours later
  job.vocab_sha256 = job.train_data->info().vocab_sha256;
}

checkpoint::TrainerState checkpoint_record(PretrainJob& job) {
  checkpoint::TrainerState s;
  const trainer::TrainStepState st = job.step->state();
  s.step = st.step;
  s.scheduler_step = st.scheduler_step;
  s.loss_scaler = st.scaler;
  s.data = job.start_position;
  if (job.loader) {
    const auto pos = job.loader->state();
    s.data = checkpoint::DataPosition{pos.epoch, pos.consumed_samples};
  }
  s.config = resolved_effective(job);
  s.vocab_sha256 = job.vocab_sha256;
  s.world_size = job.world;
  s.tokenizer = job.tokenizer_record;
  s.origin = job.origin;
  s.attention_kernels = job.attention_kernels;
  return s;
}

KeyValues resolved_effective(const PretrainJob& job) {
  KeyValues kv = job.cfg.effective;
  if (job.tokenizer_record) {  // the config's tokenizer.* keys say what the record says, not the defaults
    kv["tokenizer.kind"] = job.tokenizer_record->kind;
    kv["tokenizer.lower_case"] = job.tokenizer_record->lower_case ? "true" : "false";
  } else {  // unknown: no default may pass for a record
    kv.erase("tokenizer.kind");
    kv.erase("tokenizer.lower_case");
  }
  return kv;
}

namespace {
/// Rank 0's TensorBoard event file under <checkpoint.dir>/tensorboard (train.tensorboard),
/// or nullptr (other ranks; off; a build without it, said once in the log).
std::unique_ptr<metrics::EventFileWriter> open_tensorboard(const PretrainJob& job) {
  if (job.rank != 0 || !job.cfg.train.tensorboard) return nullptr;
  if (!metrics::tensorboard_built_in()) {
    log::info("TensorBoard: not built in (configured with TUPE_TENSORBOARD=OFF); metrics in JSONL only");
    return nullptr;
  }
  auto writer = std::make_unique<metrics::EventFileWriter>(job.cfg.checkpoint.dir + "/tensorboard");
  log::debug("TensorBoard: " + writer->path());
  return writer;
}
}  // namespace

void start_loader(PretrainJob& job) {
  const c10::Device device = job.device();
  try {
    job.loader = std::make_unique<data_pipeline::Loader>(
        job.train_data, job.loader_config, job.rank, job.world,
        data_pipeline::LoaderState{job.start_position.epoch, job.start_position.consumed_samples},
        [device] { dist::set_current_device(device); }, job.word_boundaries);
  } catch (const Error& e) {
    if (job.resumed_state_file.empty()) throw;
    TUPE_FAIL(job.resumed_state_file << ": its data position does not fit these shards: " << e.what());
  }
  const TrainOptions& t = job.cfg.train;
  job.metrics = std::make_unique<MetricsLog>(
      t.metrics_dir.empty() ? job.cfg.checkpoint.dir + "/metrics" : t.metrics_dir, job.rank, open_tensorboard(job),
      job.resumed_state_file.empty() ? -1 : job.step->step());
  // The attention kernels this run gets (the same on every rank: one device type, one config),
  // for its shapes: a micro-batch in training, this rank's share of a global batch in
  // evaluation, each padded to at most the shards' longest sequence.
  const at::ScalarType compute = trainer::autocast_dtype(job.precision);
  const int64_t length = job.train_data->info().max_seq_len;
  job.attention_kernels.emplace_back("training", model::attention_kernel(job.cfg.model, job.plan.micro_batch, length,
                                                                         device, compute, true, true));
  job.attention_kernels.emplace_back(
      "evaluation", model::attention_kernel(job.cfg.model, std::max<int64_t>(1, job.cfg.data.global_batch_size / job.world),
                                            length, device, compute, false, true));
  // The run's first record: which tupe runs, from which step, with which attention kernels
  // (docs/formats.md "Metrics").
  nlohmann::json build = nlohmann::json::object(), kernels = nlohmann::json::object();
  for (const auto& [k, v] : build_info()) build[k] = v;
  for (const auto& [k, v] : job.attention_kernels) kernels[k] = v;
  job.metrics->write(
      {{"event", "start"}, {"step", job.step->step()}, {"build", build}, {"attention_kernels", kernels}});
}

namespace {
/// 0.1257 -> "0.126", 989.4 -> "989": a console figure, not a config value.
std::string three_digits(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}
}  // namespace

void announce(PretrainJob& job) {
  const PretrainConfig& cfg = job.cfg;
  // The MFU's peak: train.peak_tflops, else the GPU's datasheet figure, else the CPU's own
  // figures (cpu_peak.h: threads x clock x FLOPs per cycle; nothing measured, nothing cached).
  job.peak_tflops = cfg.train.peak_tflops;
  job.peak_source = "train.peak_tflops";
  if (job.peak_tflops <= 0 && job.use_cuda) {
    const std::string name = dist::cuda_device_name(job.device().index());
    job.peak_tflops = table_peak_tflops(name, job.precision, cfg.train.tf32);
    job.peak_source =
        job.peak_tflops > 0 ? name + " datasheet" : "unknown GPU '" + name + "': set train.peak_tflops for MFU";
  } else if (job.peak_tflops <= 0) {
    const std::string dtype = job.precision == trainer::Precision::kBf16 ? "bf16" : "fp32";
    const PeakFigure peak = cpu_peak(cpu_facts(), at::get_num_threads(), dtype);
    job.peak_tflops = peak.tflops;
    job.peak_source = peak.source;
  }
  const std::string& peak_source = job.peak_source;
  std::ostringstream msg;
  msg << "pre-training " << model::to_string(cfg.model.position_encoding) << " (" << model::count_parameters(*job.net)
      << " parameters) on " << job.world << " rank(s), " << job.device().str() << ", " << job.comm().backend_name()
      << " all-reduce in " << job.step->ddp().num_buckets() << " bucket(s); global batch " << cfg.data.global_batch_size
      << " = " << job.world << " x " << job.plan.accumulation << " x " << job.plan.micro_batch << "; "
      << job.loader->steps_per_epoch() << " steps per epoch; precision " << to_string(job.precision) << "; MFU peak "
      << (job.peak_tflops > 0 ? three_digits(job.peak_tflops) + " TFLOP/s (" + peak_source + ")" : peak_source);
  for (const auto& [phase, kernel] : job.attention_kernels) msg << "; " << phase << " attention " << kernel;
  job.progress->message(msg.str());
}

PretrainResult run_pretraining(const dist::MpiEnv& env, const PretrainConfig& cfg, const std::string& resume,
                               const std::function<void(const KeyValues& effective)>& on_start) {
  check_config(cfg);
  // From here to step 1 every wait on the other ranks is bounded (dist/startup.h).
  env.set_startup_timeout(cfg.dist.startup_limit_s());
  // Every rank runs the same effective config (the first differing key is named).
  dist::require_agreement(env, "config check", dist::config_entries(cfg.effective));
  PretrainJob job(env, cfg);
  // One job per checkpoint folder: a second run into it refuses, naming the holder.
  job.folder_lock = dist::lock_output_folder(env, cfg.checkpoint.dir, "checkpoint.dir", "tupe pretrain");
  job.max_steps = cfg.train.max_steps > 0 ? cfg.train.max_steps : cfg.optimizer.total_steps;
  setup_device(job);
  init_from_source(job);
  open_data(job);
  build_model(job);
  resume_job(job, resume);
  start_loader(job);
  if (on_start && job.rank == 0) on_start(resolved_effective(job));
  announce(job);
  env.end_startup();
  train_loop(job);
  job.result.final_step = job.step->step();
  return job.result;
}

}  // namespace tupe::pretrain
