// Step time of the model variants (BERT-A first, then BERT-A^d, RoPE, ALiBi, NoPE, TUPE-A, BERT-R,
// TUPE-R last; --variants picks some), interleaved in ONE process (run by hand, not a test).
//   variant_step_bench --shards DIR [--variants LIST] [--hidden 256] [--layers 4] [--seq 128] [--batch 16]
//                      [--rounds 40] [--warmup 3] [--threads 1] [--precision fp32|bf16]
//                      [--device cpu|cuda] [--sdpa both|pinned|default] [--pin KERNEL]
//                      [--peak-tflops T]
//
// Each round draws one batch from the loader (real shards, dynamic masks) and runs one full
// pre-training step with it on every variant in turn: forward at the masked positions,
// summed cross-entropy, backward into a flat gradient buffer, and the shared optimizer step
// (/ masked tokens, norm check, clipping, AdamW: trainer/optimizer_step.h), what one rank of
// `tupe pretrain` does per step, without the collectives. Dropout is on (model defaults).
// Interleaving puts every variant under the same machine load, so the per-round ratio
// t(variant) / t(BERT-A) is far less noisy than comparing separate runs. Reports, per variant,
// the median of the wall-clock and of the thread-CPU step time, the median of the
// per-round ratios to BERT-A, tokens/s (padded tokens of the median step) and MFU
// (trainer/pretrain/flops.h; peak from the GPU table, or measured on the CPU). On --device
// cuda each step ends with a device synchronize (the CPU-time column then means little).
//
// SDPA kernels (model/attention.h): TUPE-R's bias needs a gradient, so it never runs on cuDNN
// (whose backward gives the bias no gradient) and gets the memory-efficient kernel; BERT-A's
// padding mask would get cuDNN attention from torch on H100/H200. So the variants are timed
// twice (--sdpa both, the default):
//   pinned   every variant on ONE kernel (--pin, default: efficient on CUDA, math on the
//            CPU): the ratio then measures the positional terms, not two kernels; this is
//            also what `tupe pretrain` trains with (cuDNN off for masked training forwards)
//   default  torch's own choice for each variant (cuDNN allowed where the mask needs no
//            gradient): what the kernels differ by
// Each table names the kernel SDPA picks for BERT-A's and TUPE-R's attention.
#include <ATen/ATen.h>
#include <torch/cuda.h>
#include <time.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <optional>

#include "bench/bench_setup.h"
#include "common/config_fields.h"
#include "common/error.h"
#include "common/host_memory.h"
#include "data_pipeline/loader.h"
#include "dist/device.h"
#include "dist/grad_buffer.h"
#include "model/attention.h"
#include "model/sdpa_kernels.h"
#include "model/tupe_bert.h"
#include "trainer/autocast.h"
#include "trainer/loss_scaler.h"
#include "trainer/lr_schedule.h"
#include "trainer/optimizer.h"
#include "trainer/optimizer_step.h"
#include "trainer/pretrain/cpu_peak.h"
#include "trainer/pretrain/flops.h"

namespace po = boost::program_options;
using namespace tupe;

namespace {

constexpr const char* kAllVariants =
    "bert-absolute,bert-absolute-untied,rope,alibi,none,tupe-absolute,bert-relative,tupe-relative";

double thread_cpu_s() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

struct Variant {
  std::string name;
  model::ModelOptions config;
  model::TupeBert net{nullptr};
  checkpoint::NamedTensors named;
  std::unique_ptr<dist::GradBuffer> grads;  ///< the flat gradient buffer, as DDP lays it out
  std::unique_ptr<trainer::Optimizer> optimizer;
  std::unique_ptr<trainer::DynamicLossScaler> scaler;
  std::unique_ptr<trainer::OptimizerStep> step;
  std::vector<double> wall_s, cpu_s, ratio;
};

/// Sets every attention layer's cuDNN rule (model/attention.h) of `net`.
void set_avoid_cudnn(model::TupeBert& net, bool avoid) {
  for (const auto& m : net->modules(/*include_self=*/false))
    if (auto* a = dynamic_cast<model::SelfAttentionImpl*>(m.get())) a->avoid_cudnn_in_training = avoid;
}

}  // namespace

int main(int argc, char** argv) {
  const bool malloc_kept = keep_freed_host_memory();  // as `tupe` does (TUPE_HOST_MALLOC=default: glibc's policy)
  std::string shards, precision, device_name, sdpa_modes, pin_name, variant_list;
  double peak_tflops = 0;
  int64_t hidden = 256, layers = 4, seq = 128, batch = 16, rounds = 40, warmup = 3, threads = 1;
  po::options_description desc("variant_step_bench options");
  desc.add_options()("help", "this help")("shards", po::value(&shards)->required(), "training shard file or folder")(
      "hidden", po::value(&hidden)->default_value(256), "d (heads = d / 64, ffn = 4 d)")(
      "layers", po::value(&layers)->default_value(4), "encoder layers")(
      "seq", po::value(&seq)->default_value(128), "model.max_positions; batches are padded to the shards' length")(
      "batch", po::value(&batch)->default_value(16), "sequences per step")(
      "rounds", po::value(&rounds)->default_value(40), "timed rounds (one step of every variant each)")(
      "warmup", po::value(&warmup)->default_value(3), "untimed rounds first")(
      "threads", po::value(&threads)->default_value(1), "intra-op threads")(
      "precision", po::value(&precision)->default_value("fp32"), "fp32 | bf16 (autocast)")(
      "device", po::value(&device_name)->default_value("cpu"), "cpu | cuda")(
      "sdpa", po::value(&sdpa_modes)->default_value("both"),
      "both | pinned | default: time the variants on one pinned SDPA kernel, with torch's own choice, or both")(
      "pin", po::value(&pin_name)->default_value(""), "the pinned SDPA kernel: efficient (CUDA default) | flash | cudnn | "
                                                       "math (CPU default)")(
      "variants", po::value(&variant_list)->default_value(kAllVariants),
      "comma-separated position encodings, BERT-A first (the ratios' reference) and TUPE-R last")(
      "peak-tflops", po::value(&peak_tflops)->default_value(0.0),
      "peak TFLOP/s for MFU; 0: the GPU table (trainer/pretrain/flops.h) or measured on the CPU");
  try {
    po::variables_map vm;
    po::store(po::parse_command_line(argc, argv, desc), vm);
    if (vm.count("help")) {
      std::cout << desc << "\n";
      return 0;
    }
    po::notify(vm);
    TUPE_CHECK(precision == "fp32" || precision == "bf16", "--precision: '" << precision << "' is not fp32 or bf16");
    TUPE_CHECK(device_name == "cpu" || device_name == "cuda", "--device: '" << device_name << "' is not cpu or cuda");
    TUPE_CHECK(device_name == "cpu" || torch::cuda::is_available(), "--device: cuda requested but no GPU is visible");
    TUPE_CHECK(sdpa_modes == "both" || sdpa_modes == "pinned" || sdpa_modes == "default",
               "--sdpa: '" << sdpa_modes << "' is not both, pinned or default");
    const c10::Device device(device_name == "cuda" ? c10::kCUDA : c10::kCPU, device_name == "cuda" ? 0 : -1);
    const model::SdpaKernel pin =
        model::parse_sdpa_kernel(pin_name.empty() ? (device.is_cuda() ? "efficient" : "math") : pin_name);
    const auto sync = [&] {
      if (device.is_cuda()) torch::cuda::synchronize();
    };
    at::set_num_threads(static_cast<int>(threads));

    bench::BenchData data = bench::open_bench_data(shards, batch);
    const auto& ds = data.dataset;
    data_pipeline::Loader& loader = *data.loader;

    trainer::OptimizerOptions oo;
    trainer::PrecisionOptions po;
    po.precision = precision == "bf16" ? trainer::Precision::kBf16 : trainer::Precision::kFp32;
    const trainer::LrSchedule schedule(oo);
    std::vector<Variant> variants;
    const std::vector<std::string> names = split_comma_list(variant_list);
    TUPE_CHECK(names.size() >= 2 && names.front() == "bert-absolute" && names.back() == "tupe-relative",
               "--variants: '" << variant_list << "' must start with bert-absolute and end with tupe-relative");
    for (const std::string& v : names) {
      const model::ModelOptions mc = bench::bench_model(ds->info().vocab_size, hidden, layers, seq, v);
      at::manual_seed(1);
      Variant var;
      var.name = v;
      var.config = mc;
      var.net = model::TupeBert(mc);
      var.net->to(device);
      var.net->train();
      std::vector<dist::NamedParameter> params;
      for (auto& p : var.net->named_parameters()) {
        var.named.emplace_back(p.key(), p.value());
        params.push_back({p.key(), p.value()});
      }
      var.grads = std::make_unique<dist::GradBuffer>(params, int64_t{25} << 20);
      var.grads->attach(params);
      var.optimizer = trainer::make_optimizer(var.named, oo);
      var.scaler = std::make_unique<trainer::DynamicLossScaler>(po);  // S = 1: the norm check and clipping
      var.scaler->to(device);
      var.step = std::make_unique<trainer::OptimizerStep>(*var.optimizer, *var.scaler, schedule, 1.0);
      variants.push_back(std::move(var));
    }
    const auto amp = precision == "bf16" ? at::kBFloat16 : at::kFloat;
    if (peak_tflops <= 0)
      peak_tflops = device.is_cuda() ? pretrain::table_peak_tflops(dist::cuda_device_name(0), po.precision, false)
                                     : pretrain::cpu_peak(pretrain::cpu_facts(), at::get_num_threads(), precision == "bf16" ? "bf16" : "fp32").tflops;
    std::printf("%s, d %lld, layers %lld, seq %lld, batch %lld, threads %lld, %s; %lld rounds after %lld warm-up; host "
                "malloc: %s; peak %.1f TFLOP/s\n",
                device_name.c_str(), static_cast<long long>(hidden), static_cast<long long>(layers), static_cast<long long>(seq),
                static_cast<long long>(batch), static_cast<long long>(threads), precision.c_str(),
                static_cast<long long>(rounds), static_cast<long long>(warmup),
                malloc_kept ? "freed memory kept" : "glibc default", peak_tflops);

    std::vector<std::string> modes;
    if (sdpa_modes != "default") modes.push_back("pinned");
    if (sdpa_modes != "pinned") modes.push_back("default");
    for (const std::string& mode : modes) {
      const bool pinned = mode == "pinned";
      std::optional<model::SdpaKernelPin> pin_scope;
      if (pinned) pin_scope.emplace(pin);
      for (auto& v : variants) {
        set_avoid_cudnn(v.net, pinned);  // default: torch's own choice, cuDNN allowed
        v.wall_s.clear();
        v.cpu_s.clear();
        v.ratio.clear();
      }
      double masked_sum = 0;
      for (int64_t r = 0; r < warmup + rounds; ++r) {
        data_pipeline::MlmBatch b = loader.next();
        b.input_ids = b.input_ids.to(device);
        b.attention_mask = b.attention_mask.to(device);
        if (b.segment_ids.defined()) b.segment_ids = b.segment_ids.to(device);
        b.masked_positions = b.masked_positions.to(device);
        b.masked_labels = b.masked_labels.to(device);
        const double masked = static_cast<double>(b.masked_positions.numel());
        if (r >= warmup) masked_sum += masked;
        const at::Tensor count = at::full({1}, masked, at::TensorOptions().dtype(at::kDouble).device(device));
        for (auto& v : variants) {
          at::manual_seed(static_cast<uint64_t>(1000 + r));
          sync();
          const auto t0 = std::chrono::steady_clock::now();
          const double c0 = thread_cpu_s();
          v.grads->zero();
          at::Tensor logits;
          {
            trainer::AutocastScope autocast(device.type(), amp);
            logits = v.net->mlm_logits(b.input_ids, b.attention_mask, b.segment_ids, b.masked_positions);
          }
          at::Tensor loss = at::cross_entropy_loss(logits.to(at::kFloat), b.masked_labels, {}, at::Reduction::Sum);
          loss.backward();
          v.step->apply(v.grads->data(), r + 1, count);  // the loop's optimizer step: / count (no host sync)
          sync();
          const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
          const double cpu = thread_cpu_s() - c0;
          if (r >= warmup) {
            v.wall_s.push_back(wall);
            v.cpu_s.push_back(cpu);
            v.ratio.push_back(wall / variants.front().wall_s.back());
          }
        }
      }
      const double masked_per_token = masked_sum / static_cast<double>(rounds * batch * seq);
      const at::ScalarType dtype = precision == "bf16" ? at::kBFloat16 : at::kFloat;
      const Variant& bert_a = variants.front();
      const Variant& tupe_r = variants.back();
      std::printf("sdpa %s: %s (BERT-A %s, TUPE-R %s)\n", mode.c_str(),
                  pinned ? ("pinned to " + model::to_string(pin)).c_str() : "torch's choice, cuDNN allowed",
                  model::attention_kernel(bert_a.config, batch, seq, device, dtype, true, pinned).c_str(),
                  model::attention_kernel(tupe_r.config, batch, seq, device, dtype, true, pinned).c_str());
      std::printf("%-20s %16s %16s %22s %12s %7s\n", "variant", "wall median (s)", "cpu median (s)",
                  "vs BERT-A (median of rounds)", "tokens/s", "MFU");
      for (auto& v : variants) {
        const double wall = median(v.wall_s);
        const double tokens_per_s = static_cast<double>(batch * seq) / wall;
        const double mfu =
            pretrain::training_flops_per_token(v.config, seq, batch, masked_per_token) * tokens_per_s / (peak_tflops * 1e12);
        std::printf("%-20s %16.4f %16.4f %22.3f %12.0f %6.1f%%\n", v.name.c_str(), wall, median(v.cpu_s),
                    median(v.ratio), tokens_per_s, 100.0 * mfu);
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "variant_step_bench: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
