// The CPU's matrix-multiply peak for MFU, measured once per machine and cached, so that the
// figure does not depend on the load at the start of a run (docs/metrics: README "MFU").
//
// Measurement: the best of kPeakRuns timed runs of n x n x n GEMMs (n = 2048, each run at
// least 50 ms) in the run's dtype with this process's intra-op threads, after one warm-up
// product. The best run, not the mean: a run slowed by other load only lowers the figures
// that are not kept.
// Cache: <cache dir>/cpu_peak.json, the cache dir being $TUPE_CACHE, else
// $XDG_CACHE_HOME/tupe, else $HOME/.cache/tupe:
//   {"format": "tupe-cpu-peak", "format_version": 1,
//    "peaks": {"<cpu model> | 2 threads | fp32": {"tflops": 0.0913, "runs": 5, "n": 2048}}}
// keyed by the CPU model (/proc/cpuinfo "model name"), the thread count and the dtype.
#pragma once
#include <filesystem>
#include <string>

namespace tupe::pretrain {

/// A peak and where it came from (for the log and the metrics).
struct PeakFigure {
  double tflops = 0;   ///< TFLOP/s per rank; <= 0: unknown
  std::string source;  ///< e.g. "cached in /root/.cache/tupe/cpu_peak.json", "train.peak_tflops"
};

/// Timed runs behind a measured peak.
inline constexpr int kPeakRuns = 5;

/// $TUPE_CACHE, else $XDG_CACHE_HOME/tupe, else $HOME/.cache/tupe, else "" (none known).
std::filesystem::path tupe_cache_dir();

/// "<cpu model> | <threads> threads | <dtype>": the cache key of this machine.
std::string cpu_peak_key(int threads, const std::string& dtype);

/// Best-of-`runs` GEMM rate (TFLOP/s) of this process on the CPU in `dtype` ("fp32" or
/// "bf16"), n x n x n products. Throws tupe::Error for another dtype.
double measure_cpu_gemm_tflops(const std::string& dtype, int runs = kPeakRuns, int64_t n = 2048);

/// The cached peak of this machine (key cpu_peak_key(threads, dtype)) from
/// `cache_dir`/cpu_peak.json; when absent, measured and added to the file (written
/// atomically). An unreadable cache is re-measured and rewritten, an unwritable one is
/// reported in `source` (never an error). `cache_dir` "" = measure, cache nothing.
PeakFigure cached_cpu_peak(const std::filesystem::path& cache_dir, int threads, const std::string& dtype);

}  // namespace tupe::pretrain
