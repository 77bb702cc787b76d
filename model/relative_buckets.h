// T5 relative-position buckets (Raffel et al. 2020), bidirectional, as TUPE uses them
// (TUPE Eq. 8, 11; docs/model.md "The relative bias").
//
// With num_buckets = 32, max_distance = 128 and r = j - i (key minus query position):
//   bucket 0: r = 0;  1..7: r = -1..-7;  8..15: log-spaced bins for r <= -8 (15: r <= -91);
//   16: never produced (used for the [CLS] row);  17..23: r = +1..+7;  24..31: mirror of
//   8..15 for r > 0.  The table has num_buckets + 1 rows; row num_buckets serves the
//   [CLS] column.
#pragma once
#include <ATen/core/Tensor.h>
#include <cstdint>

namespace tupe::model {

/// Bucket of relative position r = j - i. Exact at the log-bin edges (computed in double
/// with a 1e-9 guard, so n = 16, 32, 64 land in their own bins as docs/model.md's table says).
int64_t t5_relative_bucket(int64_t r, int64_t num_buckets, int64_t max_distance);

/// Bucket of every (i, j) pair, shape (L, L), int64, on CPU. With `untie_cls`, the [CLS]
/// column (i != 0, j = 0) gets bucket num_buckets and the [CLS] row (i = 0, all j) gets
/// num_buckets / 2, as the TUPE reference code does.
at::Tensor relative_bucket_matrix(int64_t L, int64_t num_buckets, int64_t max_distance, bool untie_cls);

}  // namespace tupe::model
