// What the trace ranges cost when no trace is taken (run by hand, not a test):
//   trace_overhead_bench --shards DIR [--hidden 256] [--layers 4] [--batch 16] [--micro 8]
//                        [--rounds 40] [--warmup 3] [--threads 1] [--extra 1000]
//
// One rank (world size 1, the MPI backend) runs the loop's step (pretrain::run_mlm_step: the
// micro-steps through DDP, "all-reduce bucket <i>", the gradient sync and the optimizer step),
// which opens its named ranges (dist/trace.h: forward and backward per micro-batch, one per
// bucket, gradient sync wait, optimizer; the loop adds data wait) with no profiler running.
// Each round runs, on the same batch and model, interleaved so both see the same load:
//   A  the step as shipped;
//   B  the same step plus --extra more dormant ranges (opened and closed around nothing),
//      i.e. about 1000 / 8 = 125 times the ranges a step opens.
// The ratio B / A (median of the per-round ratios) bounds the cost of the shipped ranges from
// above by (B / A - 1) / 125. Also printed: one dormant range's cost in ns (a tight loop).
#include <ATen/ATen.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <vector>

#include "bench/bench_setup.h"
#include "common/error.h"
#include "common/host_memory.h"
#include "data_pipeline/loader.h"
#include "dist/context.h"
#include "dist/device.h"
#include "dist/trace.h"
#include "model/tupe_bert.h"
#include "trainer/autocast.h"
#include "trainer/pretrain/step.h"

namespace po = boost::program_options;
using namespace tupe;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/// `n` dormant ranges, one after the other.
void dormant_ranges(int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const dist::TraceRange range(dist::trace_names::kForward);
  }
}

}  // namespace

int main(int argc, char** argv) {
  keep_freed_host_memory();
  std::string shards;
  int64_t hidden = 256, layers = 4, batch = 16, micro = 8, rounds = 40, warmup = 3, threads = 1, extra = 1000;
  po::options_description desc("trace_overhead_bench options");
  desc.add_options()("help", "this help")("shards", po::value(&shards)->required(), "training shard file or folder")(
      "hidden", po::value(&hidden)->default_value(256), "d (heads = d / 64, ffn = 4 d)")(
      "layers", po::value(&layers)->default_value(4), "encoder layers")(
      "batch", po::value(&batch)->default_value(16), "sequences per optimizer step")(
      "micro", po::value(&micro)->default_value(8), "sequences per micro-step")(
      "rounds", po::value(&rounds)->default_value(40), "timed rounds (A then B each)")(
      "warmup", po::value(&warmup)->default_value(3), "untimed rounds first")(
      "threads", po::value(&threads)->default_value(1), "intra-op threads")(
      "extra", po::value(&extra)->default_value(1000), "dormant ranges B adds per step");
  try {
    po::variables_map vm;
    po::store(po::parse_command_line(argc, argv, desc), vm);
    if (vm.count("help")) {
      std::cout << desc << "\n";
      return 0;
    }
    po::notify(vm);
    at::set_num_threads(static_cast<int>(threads));
    dist::MpiEnv env(&argc, &argv);
    const c10::Device device(c10::kCPU);
    dist::DistOptions dist_options;
    dist_options.timeout_s = 0;
    dist::DistContext context(env, dist_options, device);

    bench::BenchData data = bench::open_bench_data(shards, batch);
    const auto& ds = data.dataset;
    const model::ModelOptions mc =
        bench::bench_model(ds->info().vocab_size, hidden, layers, ds->info().max_seq_len, "tupe-relative");
    at::manual_seed(1);
    model::TupeBert net(mc);
    net->train();
    pretrain::PretrainConfig cfg;
    cfg.model = mc;
    cfg.data.global_batch_size = batch;
    cfg.precision.precision = trainer::Precision::kFp32;
    cfg.train.micro_batch_size = micro;
    cfg.optimizer.warmup_steps = 10;
    cfg.optimizer.total_steps = 100000;
    checkpoint::NamedTensors params;
    for (auto& item : net->named_parameters()) params.emplace_back(item.key(), item.value());
    trainer::TrainStep train_step(params, context.comm(), device, pretrain::step_options(cfg, cfg.precision.precision));
    const pretrain::BatchPlan plan = pretrain::plan_batches(batch, 1, micro, micro);
    const at::ScalarType amp = trainer::autocast_dtype(cfg.precision.precision);

    using Clock = std::chrono::steady_clock;
    const auto seconds_since = [](Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); };
    std::vector<double> a_s, b_s, ratio;
    for (int64_t r = 0; r < warmup + rounds; ++r) {
      const data_pipeline::MlmBatch b = data.loader->next();
      auto t = Clock::now();
      pretrain::run_mlm_step(train_step, *net, b, plan, amp);
      const double a = seconds_since(t);
      t = Clock::now();
      dormant_ranges(extra);
      pretrain::run_mlm_step(train_step, *net, b, plan, amp);
      const double bb = seconds_since(t);
      if (r < warmup) continue;
      a_s.push_back(a);
      b_s.push_back(bb);
      ratio.push_back(bb / a);
    }
    const int64_t loop = 10'000'000;
    const auto t = Clock::now();
    dormant_ranges(loop);
    const double per_range_ns = 1e9 * seconds_since(t) / static_cast<double>(loop);
    const double step_ranges = 2.0 * static_cast<double>(plan.accumulation) +
                               static_cast<double>(train_step.ddp().num_buckets()) + 3.0;
    std::printf("trace_overhead_bench: cpu, tupe-relative d %lld, %lld layers, batch %lld = %lld x %lld, seq %lld, "
                "threads %lld, %lld rounds after %lld warm-up, %zu bucket(s)\n",
                static_cast<long long>(hidden), static_cast<long long>(layers), static_cast<long long>(batch),
                static_cast<long long>(plan.accumulation), static_cast<long long>(micro),
                static_cast<long long>(ds->info().max_seq_len), static_cast<long long>(threads),
                static_cast<long long>(rounds), static_cast<long long>(warmup), train_step.ddp().num_buckets());
    std::printf("A (as shipped, no trace)      median step %.4f s\n", median(a_s));
    std::printf("B (+%lld dormant ranges)     median step %.4f s\n", static_cast<long long>(extra), median(b_s));
    std::printf("B / A (median of rounds)      %.4f\n", median(ratio));
    std::printf("one dormant range             %.1f ns; a step opens %.0f: %.2e of a step\n", per_range_ns, step_ranges,
                per_range_ns * 1e-9 * step_ranges / median(a_s));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "trace_overhead_bench: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
