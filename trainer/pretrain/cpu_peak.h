// The CPU's peak for MFU, from the CPU's own figures and a 5 ms clock probe (no GEMM timed):
//   peak FLOP/s = threads x clock x FLOPs per cycle per thread,
// threads = this rank's intra-op threads (capped at the CPUs it may run on), clock = the
// highest of /proc/cpuinfo's "cpu MHz", cpufreq's cpuinfo_max_freq and the clock measured by
// a chain of dependent adds (a VM's /proc/cpuinfo shows the nominal clock, 2.45 GHz on the CI's
// AMD EPYC, while the core boosts: at::mm there reached 115% of a peak at 2.45 GHz), and FLOPs per cycle
// from the ISA flags, counting two vector FMA pipes per core (the most any x86 core has):
//   fp32: avx512f 64, avx2+fma 32, avx 16, sse2 8 (aarch64: asimd 16);
//   bf16: amx_bf16 1024, avx512_bf16 128, else as fp32 (bf16 products then run as fp32 FMAs);
// except where a microarchitecture runs 512-bit instructions on 256-bit pipes, which the flags
// do not show: kNarrowAvx512 below names those rows (vendor, family, models) with the source,
// and the peak's text names the row used.
// Each factor is an upper bound (SMT siblings counted as cores, the boost clock, two pipes), so
// the MFU it gives is never above 100%; it is a ceiling, not what a GEMM reaches (on this CI's
// AMD EPYC, a Zen 4, at::mm reached 57% of it in fp32 and 70% in bf16 under load;
// CpuPeak.ThisMachinesPeakBoundsWhatAtMmReaches prints both).
#pragma once
#include <string>

namespace tupe::pretrain {

/// A peak and where it came from (for the log and the metrics).
struct PeakFigure {
  double tflops = 0;   ///< TFLOP/s per rank; <= 0: unknown
  std::string source;  ///< e.g. "CPU figures: 2 threads x 2.45 GHz x 32 fp32 FLOP/cycle (avx2+fma; AMD EPYC)"
};

/// A microarchitecture whose AVX-512 runs on 256-bit FMA pipes (two of them): 32 fp32 and,
/// with avx512_bf16, 64 bf16 FLOP/cycle, half of what the flags suggest.
struct NarrowAvx512Row {
  const char* vendor;        ///< /proc/cpuinfo vendor_id
  int family;                ///< "cpu family"
  int model_first, model_last;  ///< "model" range, inclusive
  const char* name;          ///< microarchitecture and parts
  const char* source;        ///< where the width is stated
};

/// Zen 4 (AMD family 19h with AVX-512: Genoa, Raphael, Phoenix, Bergamo) double-pumps 512-bit
/// instructions through its 256-bit units; Zen 5's mobile parts (family 1Ah, models 20h-2Fh,
/// Strix Point) keep 256-bit datapaths, while its desktop and server parts have 512-bit ones.
/// Sources: A. J. Yee, "Zen4's AVX512 Teardown" (2022) and "Zen5's AVX512 Teardown" (2024),
/// numberworld.org; AMD's Software Optimization Guide for the AMD Zen 4 Microarchitecture
/// (publication 57647).
inline constexpr NarrowAvx512Row kNarrowAvx512[] = {
    {"AuthenticAMD", 0x19, 0x00, 0xFF, "Zen 4 (family 19h with AVX-512)",
     "Yee 2022, Zen4's AVX512 Teardown; AMD pub. 57647"},
    {"AuthenticAMD", 0x1A, 0x20, 0x2F, "Zen 5 mobile (family 1Ah, models 20h-2Fh)", "Yee 2024, Zen5's AVX512 Teardown"},
};

/// What the peak is computed from; cpu_facts() reads this machine's.
struct CpuFacts {
  std::string model = "unknown CPU";  ///< /proc/cpuinfo "model name"
  std::string vendor;                 ///< /proc/cpuinfo "vendor_id" ("" when absent)
  int family = -1;                    ///< /proc/cpuinfo "cpu family" (-1 when absent)
  int model_number = -1;              ///< /proc/cpuinfo "model" (-1 when absent)
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

/// The same for a CPU: halved for an AVX-512 figure on a kNarrowAvx512 row, whose name and
/// source then join the text (e.g. "avx512f on 256-bit pipes: Zen 4 (...); Yee 2022, ...").
std::pair<double, std::string> flops_per_cycle(const CpuFacts& facts, const std::string& dtype);

/// The peak of `threads` intra-op threads in `dtype` on a CPU with `facts` (header comment);
/// tflops <= 0 with the reason in source when the clock is unknown. Throws tupe::Error for a
/// dtype other than fp32/bf16 or threads < 1.
PeakFigure cpu_peak(const CpuFacts& facts, int threads, const std::string& dtype);

}  // namespace tupe::pretrain
