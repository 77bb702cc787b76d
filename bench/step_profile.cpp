// Per-optimizer-step profile of pre-training at BERT-Base size (run by hand, not a test):
// ATen ops dispatched, host syncs, and wall time by phase, on CPU or CUDA.
//   step_profile --shards DIR [--device cpu|cuda] [--variant tupe-relative] [--hidden 768]
//                [--layers 12] [--batch 8] [--micro 4] [--steps 3] [--precision fp32|bf16]
//
// One rank (world size 1, the MPI backend on CPU, NCCL on CUDA) runs the loop's step: the
// micro-steps' forward and backward through DDP, the gradient sync, and the shared
// optimizer step (norm/inf check, unscale and clip, scaler update, AdamW), exactly the
// calls `tupe pretrain` makes on a non-log step. Counting uses a global RecordFunction
// observer: an ATen op ("aten::...") counts when it starts outside any other ATen op on its
// thread (ops called from inside other ops are not counted again; autograd's backward nodes
// are not ops, the ops they run are). "Host syncs" are
// the ops that make the host wait for a device value: aten::_local_scalar_dense (what
// .item() dispatches) and device-to-host copies; on the CPU they cost nothing, but each one
// stalls a GPU's queue, so they are counted on the CPU too.
#include <ATen/ATen.h>
#include <ATen/record_function.h>
#include <torch/cuda.h>

#include <algorithm>
#include <atomic>
#include <boost/program_options.hpp>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "bench/bench_setup.h"
#include "common/error.h"
#include "common/host_memory.h"
#include "data_pipeline/loader.h"
#include "dist/context.h"
#include "dist/ddp.h"
#include "dist/device.h"
#include "model/tupe_bert.h"
#include "trainer/autocast.h"
#include "trainer/pretrain/step.h"

namespace po = boost::program_options;
using namespace tupe;

namespace {

/// Counts top-level ATen ops on every thread while enabled (a process-wide observer).
class OpObserver {
 public:
  OpObserver() {
    handle_ = at::addGlobalCallback(at::RecordFunctionCallback(&OpObserver::on_start, &OpObserver::on_end)
                                        .scopes({at::RecordScope::FUNCTION}));
  }
  ~OpObserver() { at::removeCallback(handle_); }

  /// Resets the counts of the current phase.
  static void reset() {
    std::lock_guard<std::mutex> lock(mutex());
    counts().clear();
  }
  static std::map<std::string, int64_t> take() {
    std::lock_guard<std::mutex> lock(mutex());
    return counts();
  }

 private:
  static std::mutex& mutex() {
    static std::mutex m;
    return m;
  }
  static std::map<std::string, int64_t>& counts() {
    static std::map<std::string, int64_t> c;
    return c;
  }
  static int& depth() {
    thread_local int d = 0;
    return d;
  }
  /// Per thread: for each record open now, whether it is an ATen op (autograd's
  /// "evaluate_function" records wrap the ops of a backward node and are not ops).
  static std::vector<char>& open_records() {
    thread_local std::vector<char> v;
    return v;
  }
  static std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction& fn) {
    const bool op = std::string_view(fn.name()).rfind("aten::", 0) == 0;
    open_records().push_back(op ? 1 : 0);
    if (op && depth()++ == 0) {
      std::lock_guard<std::mutex> lock(mutex());
      ++counts()[fn.name()];
    }
    return nullptr;
  }
  static void on_end(const at::RecordFunction&, at::ObserverContext*) {
    if (open_records().empty()) return;
    if (open_records().back()) --depth();
    open_records().pop_back();
  }

  at::CallbackHandle handle_;
};

int64_t total(const std::map<std::string, int64_t>& c) {
  int64_t n = 0;
  for (const auto& [_, k] : c) n += k;
  return n;
}

int64_t host_syncs(const std::map<std::string, int64_t>& c) {
  int64_t n = 0;
  for (const auto& [name, k] : c)
    if (name == "aten::_local_scalar_dense" || name == "aten::item" || name == "aten::is_nonzero") n += k;
  return n;
}

}  // namespace

int main(int argc, char** argv) {
  keep_freed_host_memory();
  std::string shards, device_name, variant, precision;
  int64_t hidden = 768, layers = 12, batch = 8, micro = 4, steps = 3, threads = 0, top_n = 8;
  po::options_description desc("step_profile options");
  desc.add_options()("help", "this help")("shards", po::value(&shards)->required(), "training shard file or folder")(
      "device", po::value(&device_name)->default_value("cpu"), "cpu | cuda")(
      "variant", po::value(&variant)->default_value("tupe-relative"), "position encoding")(
      "hidden", po::value(&hidden)->default_value(768), "d (heads = d / 64, ffn = 4 d)")(
      "layers", po::value(&layers)->default_value(12), "encoder layers")(
      "batch", po::value(&batch)->default_value(8), "sequences per optimizer step")(
      "micro", po::value(&micro)->default_value(4), "sequences per micro-step")(
      "steps", po::value(&steps)->default_value(3), "profiled steps (after one warm-up step)")(
      "threads", po::value(&threads)->default_value(0), "intra-op threads (0 = LibTorch default)")(
      "precision", po::value(&precision)->default_value("fp32"), "fp32 | bf16")(
      "top", po::value(&top_n)->default_value(8), "most dispatched ops listed per phase");
  try {
    po::variables_map vm;
    po::store(po::parse_command_line(argc, argv, desc), vm);
    if (vm.count("help")) {
      std::cout << desc << "\n";
      return 0;
    }
    po::notify(vm);
    if (threads > 0) at::set_num_threads(static_cast<int>(threads));
    dist::MpiEnv env(&argc, &argv);
    const c10::Device device =
        dist::resolve_device(env, dist::parse_device_request(device_name, "--device"), "--device");
    dist::DistOptions dist_options;
    dist_options.timeout_s = 0;
    dist::DistContext context(env, dist_options, device);

    bench::BenchData data = bench::open_bench_data(shards, batch);
    const auto& ds = data.dataset;
    data_pipeline::Loader& loader = *data.loader;
    const model::ModelOptions mc =
        bench::bench_model(ds->info().vocab_size, hidden, layers, ds->info().max_seq_len, variant);
    at::manual_seed(1);
    model::TupeBert net(mc);
    net->to(device);
    net->train();

    pretrain::PretrainConfig cfg;
    cfg.model = mc;
    cfg.data.global_batch_size = batch;
    cfg.data.pad_to_max_seq_len = true;
    cfg.precision.precision = precision == "bf16" ? trainer::Precision::kBf16 : trainer::Precision::kFp32;
    cfg.train.micro_batch_size = micro;
    cfg.optimizer.warmup_steps = 10;
    cfg.optimizer.total_steps = 1000;
    checkpoint::NamedTensors params;
    for (auto& item : net->named_parameters()) params.emplace_back(item.key(), item.value());
    trainer::TrainStep train_step(params, context.comm(), device, pretrain::step_options(cfg, cfg.precision.precision));
    const pretrain::BatchPlan plan = pretrain::plan_batches(batch, 1, micro, micro);
    const at::ScalarType amp = trainer::autocast_dtype(cfg.precision.precision);

    OpObserver observer;
    at::enableRecordFunction(true);
    std::map<std::string, std::map<std::string, int64_t>> per_phase;
    std::map<std::string, double> seconds;
    const char* phases[] = {"forward", "backward", "reduce", "optimizer"};
    for (int64_t s = 0; s <= steps; ++s) {
      data_pipeline::MlmBatch b = loader.next();
      trainer::StepTimes times;
      trainer::StepPhaseHook hook = [&](const char* phase) {
        if (device.is_cuda()) torch::cuda::synchronize();
        if (s == 0) return;
        const auto c = OpObserver::take();
        if (phase != nullptr) {
          for (const auto& [name, k] : c) per_phase[phase][name] += k;
        }
        OpObserver::reset();
      };
      OpObserver::reset();
      pretrain::run_mlm_step(train_step, *net, b, plan, amp, &times, hook);
      if (s > 0)
        for (const char* p : phases) seconds[p] += times.seconds.at(p);
    }
    std::printf("step_profile: %s, %s, d %lld, %lld layers, batch %lld = %lld x %lld, seq %lld, %s, %lld steps\n",
                device.str().c_str(), variant.c_str(), static_cast<long long>(hidden), static_cast<long long>(layers),
                static_cast<long long>(batch), static_cast<long long>(batch / micro), static_cast<long long>(micro),
                static_cast<long long>(ds->info().max_seq_len), precision.c_str(), static_cast<long long>(steps));
    std::printf("%-10s %14s %12s %12s\n", "phase", "ops / step", "syncs / step", "ms / step");
    int64_t all_ops = 0, all_syncs = 0;
    double all_ms = 0;
    for (const char* p : phases) {
      const auto& c = per_phase[p];
      const double ops = static_cast<double>(total(c)) / static_cast<double>(steps);
      const double syncs = static_cast<double>(host_syncs(c)) / static_cast<double>(steps);
      const double ms = 1000.0 * seconds[p] / static_cast<double>(steps);
      all_ops += total(c);
      all_syncs += host_syncs(c);
      all_ms += ms;
      std::printf("%-10s %14.1f %12.1f %12.1f\n", p, ops, syncs, ms);
    }
    std::printf("%-10s %14.1f %12.1f %12.1f\n", "step", static_cast<double>(all_ops) / static_cast<double>(steps),
                static_cast<double>(all_syncs) / static_cast<double>(steps), all_ms);
    for (const char* p : phases) {
      std::printf("\nmost dispatched ops in the %s phase (per step):\n", p);
      std::vector<std::pair<int64_t, std::string>> top;
      for (const auto& [name, k] : per_phase[p]) top.emplace_back(k, name);
      std::sort(top.rbegin(), top.rend());
      for (size_t i = 0; i < std::min<size_t>(static_cast<size_t>(top_n), top.size()); ++i)
        std::printf("  %-40s %8.1f\n", top[i].second.c_str(), static_cast<double>(top[i].first) / static_cast<double>(steps));
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "step_profile: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
