// Dropout forward + backward: at::dropout (the reference) vs model::dropout, with one seed per
// call and keyed by sample (DropoutSampleKeys, one key per row of dim 0), side by side in one
// process, alternating (run by hand, not a test).
//   dropout_bench [--rounds 30] [--threads 1]
// Shapes: attention probabilities (16, 4, 128, 128) and hidden states (16, 128, 256), fp32,
// p = 0.1, as in bench/variant_step_bench's default sizes. Prints the median ms of each and
// the ratio.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "common/host_memory.h"
#include "model/dropout.h"

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

/// Milliseconds of one forward + backward of `drop` on a fresh leaf of `shape`.
template <class F>
double time_once(const std::vector<int64_t>& shape, F drop) {
  at::Tensor x = at::randn(shape).requires_grad_(true);
  const at::Tensor g = at::randn(shape);
  const auto t0 = std::chrono::steady_clock::now();
  drop(x).backward(g);
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  tupe::keep_freed_host_memory();  // as `tupe` does
  int rounds = 30, threads = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--rounds")) rounds = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--threads")) threads = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "dropout_bench: error: unknown option '%s' (--rounds N, --threads T)\n", argv[i]);
      return 2;
    }
  }
  at::set_num_threads(threads);
  const double p = 0.1;
  std::printf("dropout p = %.1f, fp32, %d thread(s), median of %d alternating rounds, forward + backward\n", p,
              threads, rounds);
  std::printf("%-20s %14s %9s %15s %7s %12s\n", "shape", "at::dropout ms", "tupe ms", "tupe keyed ms", "ratio",
              "keyed/tupe");
  for (const std::vector<int64_t>& shape : {std::vector<int64_t>{16, 4, 128, 128}, std::vector<int64_t>{16, 128, 256}}) {
    std::vector<double> ref, ours, keyed;
    std::vector<int64_t> samples(static_cast<size_t>(shape[0]));
    for (size_t b = 0; b < samples.size(); ++b) samples[b] = static_cast<int64_t>(1000 + 7 * b);
    for (int r = 0; r < rounds; ++r) {
      ref.push_back(time_once(shape, [&](const at::Tensor& x) { return at::dropout(x, p, true); }));
      ours.push_back(time_once(shape, [&](const at::Tensor& x) { return tupe::model::dropout(x, p, true); }));
      keyed.push_back(time_once(shape, [&](const at::Tensor& x) {
        const tupe::model::DropoutSampleKeys keys(static_cast<uint64_t>(r), samples);
        return tupe::model::dropout(x, p, true);
      }));
    }
    char name[64];
    std::snprintf(name, sizeof name, "%s", at::IntArrayRef(shape).size() == 4 ? "(16, 4, 128, 128)" : "(16, 128, 256)");
    std::printf("%-20s %14.2f %9.2f %15.2f %6.1fx %11.3f\n", name, median(ref), median(ours), median(keyed),
                median(ref) / median(ours), median(keyed) / median(ours));
  }
  return 0;
}
