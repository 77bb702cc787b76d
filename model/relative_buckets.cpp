#include "model/relative_buckets.h"

#include <ATen/ATen.h>
#include <cmath>
#include <cstdlib>

namespace tupe::model {

int64_t t5_relative_bucket(int64_t r, int64_t num_buckets, int64_t max_distance) {
  // Bidirectional: half the buckets for r <= 0, the other half (offset) for r > 0.
  const int64_t half = num_buckets / 2;
  const int64_t offset = r > 0 ? half : 0;
  const int64_t n = std::llabs(r);
  const int64_t max_exact = half / 2;  // buckets of width 1 for |r| < max_exact
  if (n < max_exact) return offset + n;
  // log-spaced: max_exact + floor(log(n / max_exact) / log(max_distance / max_exact) * (half - max_exact))
  const double v = std::log(static_cast<double>(n) / static_cast<double>(max_exact)) /
                   std::log(static_cast<double>(max_distance) / static_cast<double>(max_exact)) *
                   static_cast<double>(half - max_exact);
  const int64_t large = max_exact + static_cast<int64_t>(std::floor(v + 1e-9));
  return offset + std::min(large, half - 1);
}

at::Tensor relative_bucket_matrix(int64_t L, int64_t num_buckets, int64_t max_distance, bool untie_cls) {
  // One bucket per distance r in [-(L-1), L-1], then gathered into (L, L).
  at::Tensor by_distance = at::empty({2 * L - 1}, at::kLong);
  auto* d = by_distance.data_ptr<int64_t>();
  for (int64_t r = -(L - 1); r <= L - 1; ++r) d[r + L - 1] = t5_relative_bucket(r, num_buckets, max_distance);
  at::Tensor pos = at::arange(L, at::kLong);
  at::Tensor rel = pos.unsqueeze(0) - pos.unsqueeze(1) + (L - 1);  // [i, j] = j - i + L - 1
  at::Tensor buckets = by_distance.index_select(0, rel.reshape(-1)).reshape({L, L});
  if (untie_cls) {
    buckets.select(1, 0).fill_(num_buckets);      // others -> [CLS]
    buckets.select(0, 0).fill_(num_buckets / 2);  // [CLS] -> others (and [CLS] -> [CLS])
  }
  return buckets;
}

}  // namespace tupe::model
