#include "trainer/pretrain/cpu_peak.h"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "common/error.h"

namespace tupe::pretrain {

namespace {

/// The value after "key<spaces>:" on a /proc/cpuinfo line, or "" when the line is another key.
std::string cpuinfo_value(const std::string& line, const std::string& key) {
  if (line.rfind(key, 0) != 0) return "";
  const size_t colon = line.find(':');
  if (colon == std::string::npos) return "";
  const std::string head = line.substr(key.size(), colon - key.size());
  if (head.find_first_not_of(" \t") != std::string::npos) return "";  // "model" vs "model name"
  const size_t start = line.find_first_not_of(" \t", colon + 1);
  return start == std::string::npos ? "" : line.substr(start);
}

bool has_flag(const std::string& flags, const std::string& flag) {
  std::istringstream in(flags);
  std::string f;
  while (in >> f)
    if (f == flag) return true;
  return false;
}

}  // namespace

double measured_clock_ghz() {
  // Each add depends on the one before and takes one cycle on every x86 and Arm core; the
  // empty asm keeps x in a register the compiler may not fold or vectorize. The loop counter
  // runs on other ALUs in parallel; if it ever did not, the figure only comes out lower.
  constexpr int64_t kBlocks = 1 << 17, kAddsPerBlock = 8;
  constexpr int kRounds = 16;
  uint64_t x = 0, y = 1;
  asm volatile("" : "+r"(y));
  double best_ghz = 0;
  for (int round = 0; round < kRounds; ++round) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int64_t b = 0; b < kBlocks; ++b) {
#define TUPE_DEPENDENT_ADD \
  x += y;                  \
  asm volatile("" : "+r"(x));
      TUPE_DEPENDENT_ADD TUPE_DEPENDENT_ADD TUPE_DEPENDENT_ADD TUPE_DEPENDENT_ADD
      TUPE_DEPENDENT_ADD TUPE_DEPENDENT_ADD TUPE_DEPENDENT_ADD TUPE_DEPENDENT_ADD
#undef TUPE_DEPENDENT_ADD
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (s > 0) best_ghz = std::max(best_ghz, double(kBlocks * kAddsPerBlock) / s / 1e9);
  }
  return x == 0 ? 0 : best_ghz;  // (x is never 0: this only keeps the chain alive)
}

CpuFacts cpu_facts() {
  CpuFacts facts;
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (std::string v = cpuinfo_value(line, "model name"); !v.empty() && facts.model == "unknown CPU") facts.model = v;
    if (std::string v = cpuinfo_value(line, "vendor_id"); !v.empty() && facts.vendor.empty()) facts.vendor = v;
    try {
      if (std::string v = cpuinfo_value(line, "cpu family"); !v.empty() && facts.family < 0) facts.family = std::stoi(v);
      if (std::string v = cpuinfo_value(line, "model"); !v.empty() && facts.model_number < 0)
        facts.model_number = std::stoi(v);
    } catch (const std::exception&) {  // not a number: left unknown
    }
    if (std::string v = cpuinfo_value(line, "flags"); !v.empty() && facts.flags.empty()) facts.flags = v;
    if (std::string v = cpuinfo_value(line, "Features"); !v.empty() && facts.flags.empty()) facts.flags = v;
    if (std::string v = cpuinfo_value(line, "cpu MHz"); !v.empty()) {
      try {
        facts.clock_ghz = std::max(facts.clock_ghz, std::stod(v) / 1000.0);
      } catch (const std::exception&) {
      }
    }
  }
  std::ifstream max_freq("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq");  // kHz
  if (double khz = 0; max_freq >> khz && khz > 0) facts.clock_ghz = std::max(facts.clock_ghz, khz / 1e6);
  facts.reported_clock_ghz = facts.clock_ghz;
  // Rounded up to a 0.25 GHz step: still an upper bound, and runs on one machine, whose boost
  // moves by a few percent with the load, mostly print the same peak.
  facts.measured_clock_ghz = std::ceil(measured_clock_ghz() * 4.0) / 4.0;
  facts.clock_ghz = std::max(facts.clock_ghz, facts.measured_clock_ghz);
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) facts.cpus = CPU_COUNT(&set);
  return facts;
}

std::pair<double, std::string> flops_per_cycle(const std::string& flags, const std::string& dtype) {
  TUPE_CHECK(dtype == "fp32" || dtype == "bf16", "CPU peak: dtype " << dtype << " is not fp32 or bf16");
  if (dtype == "bf16") {
    if (has_flag(flags, "amx_bf16")) return {1024, "amx_bf16"};
    if (has_flag(flags, "avx512_bf16")) return {128, "avx512_bf16"};
  }
  // Two FMA pipes x lanes x 2 FLOPs (multiply and add).
  if (has_flag(flags, "avx512f")) return {64, "avx512f"};
  if (has_flag(flags, "avx2") && has_flag(flags, "fma")) return {32, "avx2+fma"};
  if (has_flag(flags, "avx")) return {16, "avx"};
  if (has_flag(flags, "asimd")) return {16, "asimd"};
  return {8, "sse2 or scalar"};
}

std::pair<double, std::string> flops_per_cycle(const CpuFacts& facts, const std::string& dtype) {
  auto [per_cycle, isa] = flops_per_cycle(facts.flags, dtype);
  if (isa != "avx512f" && isa != "avx512_bf16") return {per_cycle, isa};
  for (const NarrowAvx512Row& row : kNarrowAvx512)
    if (facts.vendor == row.vendor && facts.family == row.family && facts.model_number >= row.model_first &&
        facts.model_number <= row.model_last)
      return {per_cycle / 2, isa + " on 256-bit pipes: " + row.name + "; " + row.source};
  return {per_cycle, isa};
}

PeakFigure cpu_peak(const CpuFacts& facts, int threads, const std::string& dtype) {
  TUPE_CHECK(threads >= 1, "CPU peak: " << threads << " threads; need at least 1");
  const auto [per_cycle, isa] = flops_per_cycle(facts, dtype);
  const int used = facts.cpus > 0 ? std::min(threads, facts.cpus) : threads;
  if (facts.clock_ghz <= 0)
    return {0, "unknown: no CPU clock in /proc/cpuinfo or cpufreq (" + facts.model +
                   "); set train.peak_tflops for MFU"};
  char clock[96];
  if (facts.measured_clock_ghz > facts.reported_clock_ghz && facts.measured_clock_ghz >= facts.clock_ghz)
    std::snprintf(clock, sizeof clock, "%.4g GHz (measured; /proc/cpuinfo says %.4g)", facts.clock_ghz,
                  facts.reported_clock_ghz);
  else
    std::snprintf(clock, sizeof clock, "%.4g GHz", facts.clock_ghz);
  char text[512];
  std::snprintf(text, sizeof text, "CPU figures: %d thread(s) x %s x %g %s FLOP/cycle (%s; %s)", used, clock,
                per_cycle, dtype.c_str(), isa.c_str(), facts.model.c_str());
  return {used * facts.clock_ghz * per_cycle / 1e3, text};
}

}  // namespace tupe::pretrain
