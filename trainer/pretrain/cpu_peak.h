// The CPU's peak for MFU, from the CPU's own figures and a 5 ms clock probe (no GEMM timed):
//   peak FLOP/s = threads x clock x FLOPs per cycle per thread,
// threads = this rank's intra-op threads (capped at the CPUs it may run on), clock = the
// highest of /proc/cpuinfo's "cpu MHz", cpufreq's cpuinfo_max_freq and the clock measured by
// a chain of dependent adds (a VM's /proc/cpuinfo shows the nominal clock, 2.45 GHz on the CI's
// AMD EPYC, while the core boosts: at::mm there reached 115% of a peak at 2.45 GHz), and FLOPs per cycle
// from the ISA flags, counting two vector FMA pipes per core (the most any x86 core has):
//   fp32: avx512f 64, avx2+fma 32, avx 16, sse2 8 (aarch64: asimd 16);
//   bf16: amx_bf16 1024, avx512_bf16 128, else as fp32 (bf16 products then run as fp32 FMAs).
// Each factor is an upper bound (SMT siblings counted as cores, the boost clock, two pipes), so
// the MFU it gives is never above 100%; it is a ceiling, not what a GEMM reaches (about 40% of
// it for fp32 on an AMD EPYC here, bench/RESULTS.md "The CPU MFU peak from the CPU's own figures").
#pragma once
#include <string>

namespace tupe::pretrain {

/// A peak and where it came from (for the log and the metrics).
struct PeakFigure {
  double tflops = 0;   ///< TFLOP/s per rank; <= 0: unknown
  std::string source;  ///< e.g. "CPU figures: 2 threads x 2.45 GHz x 32 fp32 FLOP/cycle (avx2+fma; AMD EPYC)"
};

/// What the peak is computed from; cpu_facts() reads this machine's.
struct CpuFacts {
  std::string model = "unknown CPU";  ///< /proc/cpuinfo "model name"
  std::string flags;                  ///< /proc/cpuinfo "flags" (x86) or "Features" (aarch64), space-separated
  double clock_ghz = 0;               ///< highest known clock, GHz; <= 0: unknown
  double reported_clock_ghz = 0;      ///< what /proc/cpuinfo and cpufreq say, GHz; 0: nothing
  double measured_clock_ghz = 0;      ///< measured_clock_ghz() at cpu_facts() time, rounded up to 0.25 GHz
  int cpus = 0;                       ///< CPUs this process may run on (sched_getaffinity); <= 0: unknown
};

/// The clock this thread's core runs at now, GHz: the fastest of 16 timed chains of 2^20
/// dependent register adds (one cycle each), about 5 ms in all. Never above the true clock: a
/// round that is pre-empted or slowed only reads lower. Never throws.
double measured_clock_ghz();

/// This machine's CpuFacts (from /proc/cpuinfo, /sys/devices/system/cpu/cpu0/cpufreq, the
/// clock probe above and the affinity mask). Never throws; unknown fields keep their defaults.
CpuFacts cpu_facts();

/// FLOPs per cycle per thread in `dtype` ("fp32" or "bf16") for these ISA flags, and the flags
/// that decided it (e.g. "avx2+fma"). Throws tupe::Error for another dtype.
std::pair<double, std::string> flops_per_cycle(const std::string& flags, const std::string& dtype);

/// The peak of `threads` intra-op threads in `dtype` on a CPU with `facts` (header comment);
/// tflops <= 0 with the reason in source when the clock is unknown. Throws tupe::Error for a
/// dtype other than fp32/bf16 or threads < 1.
PeakFigure cpu_peak(const CpuFacts& facts, int threads, const std::string& dtype);

}  // namespace tupe::pretrain
