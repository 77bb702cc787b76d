#include "trainer/pretrain/cpu_peak.h"

#include <ATen/ATen.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

#include "checkpoint/durable_io.h"
#include "common/error.h"

namespace tupe::pretrain {

namespace fs = std::filesystem;

namespace {

constexpr char kCacheFormat[] = "tupe-cpu-peak";
constexpr char kCacheFile[] = "cpu_peak.json";

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) {
        std::string name = line.substr(colon + 1);
        const size_t start = name.find_first_not_of(" \t");
        return start == std::string::npos ? "unknown CPU" : name.substr(start);
      }
    }
  return "unknown CPU";
}

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

}  // namespace

fs::path tupe_cache_dir() {
  if (const std::string v = env("TUPE_CACHE"); !v.empty()) return v;
  if (const std::string v = env("XDG_CACHE_HOME"); !v.empty()) return fs::path(v) / "tupe";
  if (const std::string v = env("HOME"); !v.empty()) return fs::path(v) / ".cache" / "tupe";
  return {};
}

std::string cpu_peak_key(int threads, const std::string& dtype) {
  return cpu_model_name() + " | " + std::to_string(threads) + " threads | " + dtype;
}

double measure_cpu_gemm_tflops(const std::string& dtype, int runs, int64_t n) {
  TUPE_CHECK(dtype == "fp32" || dtype == "bf16", "CPU peak: dtype " << dtype << " is not fp32 or bf16");
  const at::ScalarType type = dtype == "bf16" ? at::kBFloat16 : at::kFloat;
  const at::Tensor a = at::randn({n, n}).to(type), b = at::randn({n, n}).to(type);
  at::Tensor c = at::mm(a, b);  // warm-up (threads, caches, packing buffers)
  using Clock = std::chrono::steady_clock;
  double best = 0;
  for (int r = 0; r < runs; ++r) {
    const auto t0 = Clock::now();
    int64_t products = 0;
    double seconds = 0;
    while (products < 1 || seconds < 0.05) {
      at::mm_out(c, a, b);
      ++products;
      seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    }
    best = std::max(best, 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n) *
                              static_cast<double>(products) / seconds / 1e12);
  }
  return best;
}

PeakFigure cached_cpu_peak(const fs::path& cache_dir, int threads, const std::string& dtype) {
  const std::string key = cpu_peak_key(threads, dtype);
  const std::string how = "best of " + std::to_string(kPeakRuns) + " " + dtype + " 2048^3 GEMMs, " +
                          std::to_string(threads) + " thread(s)";
  if (cache_dir.empty()) return {measure_cpu_gemm_tflops(dtype), "measured now (" + how + "; no cache folder)"};
  const fs::path file = cache_dir / kCacheFile;
  nlohmann::json doc;
  std::string note;
  std::error_code ec;
  if (fs::exists(file, ec)) {
    try {
      doc = nlohmann::json::parse(checkpoint::read_file_bytes(file));
      if (!doc.is_object() || doc.value("format", "") != kCacheFormat || !doc.contains("peaks") ||
          !doc["peaks"].is_object())
        throw std::runtime_error("not a " + std::string(kCacheFormat) + " file");
      const auto it = doc["peaks"].find(key);
      if (it != doc["peaks"].end() && it->is_object() && it->contains("tflops") && (*it)["tflops"].is_number() &&
          (*it)["tflops"].get<double>() > 0)
        return {(*it)["tflops"].get<double>(), "cached in " + file.string()};
    } catch (const std::exception& e) {
      note = "; " + file.string() + " was unreadable (" + e.what() + "), rewritten";
      doc = nlohmann::json();
    }
  }
  if (!doc.is_object()) doc = {{"format", kCacheFormat}, {"format_version", 1}, {"peaks", nlohmann::json::object()}};
  PeakFigure out{measure_cpu_gemm_tflops(dtype), ""};
  doc["peaks"][key] = {{"tflops", out.tflops}, {"runs", kPeakRuns}, {"n", 2048}};
  try {
    fs::create_directories(cache_dir);
    checkpoint::write_file_atomic(file, doc.dump(2) + "\n");
    out.source = "measured now (" + how + "), cached in " + file.string() + note;
  } catch (const std::exception& e) {
    out.source = "measured now (" + how + "), not cached: " + e.what();
  }
  return out;
}

}  // namespace tupe::pretrain
