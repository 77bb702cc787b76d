// The CPU's MFU peak (trainer/pretrain/cpu_peak.h): the arithmetic on given facts, the ISA
// table, and on this machine an upper bound of what at::mm reaches; the positional term of
// the FLOPs count (flops.h) paid once per micro-batch forward.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <chrono>

#include "common/error.h"
#include "trainer/pretrain/cpu_peak.h"
#include "trainer/pretrain/flops.h"

namespace tupe::pretrain {
namespace {

TEST(CpuPeak, FlopsPerCycleFromTheIsaFlags) {
  EXPECT_EQ(flops_per_cycle("fpu sse2 avx avx2 fma avx512f avx512_bf16", "fp32").first, 64);
  EXPECT_EQ(flops_per_cycle("fpu sse2 avx avx2 fma avx512f avx512_bf16", "bf16").first, 128);
  EXPECT_EQ(flops_per_cycle("sse2 avx avx2 fma avx512f amx_bf16 avx512_bf16", "bf16").first, 1024);
  EXPECT_EQ(flops_per_cycle("sse2 avx avx2 fma", "fp32"), std::make_pair(32.0, std::string("avx2+fma")));
  EXPECT_EQ(flops_per_cycle("sse2 avx avx2 fma", "bf16").first, 32);  // no bf16 unit: fp32 FMAs
  EXPECT_EQ(flops_per_cycle("sse2 avx avx2", "fp32").first, 16);       // avx2 without fma
  EXPECT_EQ(flops_per_cycle("fp asimd", "fp32").first, 16);
  EXPECT_EQ(flops_per_cycle("sse2", "fp32").first, 8);
  EXPECT_EQ(flops_per_cycle("avx512fx", "fp32").first, 8);  // whole flags only
  EXPECT_THROW(flops_per_cycle("avx2 fma", "fp16"), Error);
}

TEST(CpuPeak, Avx512OnTwo256BitPipesCountsHalf) {
  CpuFacts zen4;  // AMD EPYC 9004 (Genoa): family 25 (19h), model 17 (11h), as this CI machine
  zen4.vendor = "AuthenticAMD";
  zen4.family = 25;
  zen4.model_number = 17;
  zen4.flags = "sse2 avx avx2 fma avx512f avx512_bf16";
  // 2 pipes x 8 fp32 lanes (256 bits) x 2 FLOPs (the FMA's multiply and add) = 32.
  EXPECT_EQ(flops_per_cycle(zen4, "fp32").first, 32);
  EXPECT_EQ(flops_per_cycle(zen4, "bf16").first, 64);
  EXPECT_NE(flops_per_cycle(zen4, "fp32").second.find("avx512f on 256-bit pipes: Zen 4"), std::string::npos);
  CpuFacts zen3 = zen4;  // Zen 3 (also family 19h) has no AVX-512: the avx2 row, unchanged
  zen3.flags = "sse2 avx avx2 fma";
  EXPECT_EQ(flops_per_cycle(zen3, "fp32"), std::make_pair(32.0, std::string("avx2+fma")));
  CpuFacts turin = zen4;  // Zen 5 server (family 1Ah, model 02h): 512-bit pipes
  turin.family = 0x1A;
  turin.model_number = 0x02;
  EXPECT_EQ(flops_per_cycle(turin, "fp32").first, 64);
  CpuFacts strix = turin;  // Zen 5 mobile (model 24h): 256-bit
  strix.model_number = 0x24;
  EXPECT_EQ(flops_per_cycle(strix, "fp32").first, 32);
  CpuFacts xeon = zen4;  // Intel with AVX-512: the flags' figure, an upper bound
  xeon.vendor = "GenuineIntel";
  xeon.family = 6;
  xeon.model_number = 143;
  EXPECT_EQ(flops_per_cycle(xeon, "fp32"), std::make_pair(64.0, std::string("avx512f")));
}

TEST(CpuPeak, ThreadsTimesClockTimesFlopsPerCycle) {
  CpuFacts f;
  f.model = "Test CPU";
  f.flags = "sse2 avx avx2 fma";
  f.clock_ghz = 2.5;
  f.cpus = 4;
  const PeakFigure two = cpu_peak(f, 2, "fp32");
  EXPECT_DOUBLE_EQ(two.tflops, 2 * 2.5e9 * 32 / 1e12);
  EXPECT_EQ(two.source, "CPU figures: 2 thread(s) x 2.5 GHz x 32 fp32 FLOP/cycle (avx2+fma; Test CPU)");
  EXPECT_DOUBLE_EQ(cpu_peak(f, 16, "fp32").tflops, 4 * 2.5e9 * 32 / 1e12);  // capped at the CPUs allowed
  f.reported_clock_ghz = 2.45;  // a VM's nominal clock, below the boost the probe measured
  f.measured_clock_ghz = f.clock_ghz = 2.8;
  EXPECT_DOUBLE_EQ(cpu_peak(f, 1, "fp32").tflops, 2.8e9 * 32 / 1e12);
  EXPECT_EQ(cpu_peak(f, 1, "fp32").source,
            "CPU figures: 1 thread(s) x 2.8 GHz (measured; /proc/cpuinfo says 2.45) x 32 fp32 FLOP/cycle (avx2+fma; Test CPU)");
  f.reported_clock_ghz = f.measured_clock_ghz = 0;
  f.clock_ghz = 0;
  const PeakFigure unknown = cpu_peak(f, 2, "fp32");
  EXPECT_LE(unknown.tflops, 0);
  EXPECT_NE(unknown.source.find("set train.peak_tflops"), std::string::npos);
  EXPECT_THROW(cpu_peak(f, 0, "fp32"), Error);
}

// Best GEMM rate of `runs` timed n^3 products (TFLOP/s), measured here independently.
double best_gemm_tflops(at::ScalarType type, int64_t n, int runs) {
  const at::Tensor a = at::randn({n, n}).to(type), b = at::randn({n, n}).to(type);
  at::Tensor c = at::mm(a, b);
  double best = 0;
  for (int r = 0; r < runs; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    at::mm_out(c, a, b);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, 2.0 * n * n * n / s / 1e12);
  }
  return best;
}

TEST(CpuPeak, ThisMachinesPeakBoundsWhatAtMmReaches) {
  const CpuFacts facts = cpu_facts();
  ASSERT_GT(facts.clock_ghz, 0) << "no CPU clock on this machine";
  ASSERT_GT(facts.cpus, 0);
  // The probe reads a real core clock: above any CPU's idle floor, below any shipped boost.
  EXPECT_GT(facts.measured_clock_ghz, 0.4);
  EXPECT_LT(facts.measured_clock_ghz, 7.0);
  EXPECT_GE(facts.clock_ghz, facts.reported_clock_ghz);
  const int threads = at::get_num_threads();
  const double fp32 = best_gemm_tflops(at::kFloat, 1024, 5), bf16 = best_gemm_tflops(at::kBFloat16, 256, 3);
  const PeakFigure p32 = cpu_peak(facts, threads, "fp32"), p16 = cpu_peak(facts, threads, "bf16");
  std::printf("%s\n  at::mm fp32 %.4g TFLOP/s = %.1f%% of it\n%s\n  at::mm bf16 %.4g TFLOP/s = %.1f%% of it\n",
              p32.source.c_str(), fp32, 100 * fp32 / p32.tflops, p16.source.c_str(), bf16, 100 * bf16 / p16.tflops);
  EXPECT_LE(fp32, p32.tflops);
  EXPECT_LE(bf16, p16.tflops);
  EXPECT_GT(fp32, 0.05 * p32.tflops) << "a peak 20x above a real GEMM would make every MFU meaningless";
}

TEST(Flops, PositionalTermOncePerMicroBatchForward) {
  model::ModelOptions c;
  c.hidden_size = 64;
  c.ffn_size = 256;
  c.num_layers = 2;
  c.vocab_size = 1000;
  const double d = 64, f = 256, L = 128, V = 1000, m = 0.15;
  const double layers = 2 * (8 * d * d + 4 * d * f + 4 * L * d), head = m * (2 * d * d + 2 * d * V);
  c.position_encoding = model::PositionEncoding::kTupeRelative;
  for (const int64_t b : {1, 4, 32})
    EXPECT_NEAR(training_flops_per_token(c, 128, b, m), 3 * (layers + (4 * d * d + 2 * L * d) / b + head), 1e-6);
  c.position_encoding = model::PositionEncoding::kBertRelative;
  EXPECT_NEAR(training_flops_per_token(c, 128, 4, m), 3 * (layers + head), 1e-6);
  c.position_encoding = model::PositionEncoding::kBertAbsoluteUntied;  // U^Q, U^K of L rows, no L x L term
  for (const int64_t b : {1, 4, 32})
    EXPECT_NEAR(training_flops_per_token(c, 128, b, m), 3 * (layers + 4 * d * d / b + head), 1e-6);
  EXPECT_THROW(training_flops_per_token(c, 128, 0, m), Error);
}

}  // namespace
}  // namespace tupe::pretrain
