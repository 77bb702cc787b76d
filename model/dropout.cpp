#include "model/dropout.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <torch/csrc/autograd/custom_function.h>

#include <cmath>
#include <mutex>

#include "common/error.h"
#include "common/mix64.h"

namespace tupe::model {

namespace {

constexpr int64_t kGrain = 1 << 15;  // elements per parallel task

/// Keep threshold t = round(p * 2^32) (as 64 bits: p close to 1 must not wrap).
uint64_t keep_threshold(double p) { return static_cast<uint64_t>(std::llround(p * 4294967296.0)); }

/// u_i = fmix32(lo ^ (i * 0x9E3779B9 + hi)) for i in [begin, end): a Weyl sequence keyed by
/// the seed's high half, xor the low half, through MurmurHash3's 32-bit finaliser (a
/// bijection with full avalanche). mask[i - begin] = (u_i >= t). A loop of 32-bit integer
/// operations the compiler vectorises; cloned for AVX2 where the CPU has it.
__attribute__((target_clones("avx2", "default"))) void keep_mask_kernel(uint8_t* mask, int64_t begin, int64_t end,
                                                                         uint64_t seed, uint64_t threshold) {
  const uint32_t lo = static_cast<uint32_t>(seed), hi = static_cast<uint32_t>(seed >> 32);
  // Index i >= 2^32 folds its high bits into the key (tensors that large are not expected).
  const uint32_t fold = static_cast<uint32_t>(static_cast<uint64_t>(begin) >> 32) * 0x85EBCA77u;
  const uint32_t start = static_cast<uint32_t>(begin);
  const int64_t n = end - begin;
  if (threshold > 0xFFFFFFFFull) {  // p rounds to 1: nothing is kept
    for (int64_t j = 0; j < n; ++j) mask[j] = 0;
    return;
  }
  const uint32_t t = static_cast<uint32_t>(threshold);
  for (int64_t j = 0; j < n; ++j) {
    uint32_t h = (lo ^ fold) ^ ((start + static_cast<uint32_t>(j)) * 0x9E3779B9u + hi);
    h ^= h >> 16;
    h *= 0x85EBCA6Bu;
    h ^= h >> 13;
    h *= 0xC2B2AE35u;
    h ^= h >> 16;
    mask[j] = static_cast<uint8_t>(h >= t);
  }
}

void fill_keep_mask(uint8_t* mask, int64_t numel, uint64_t seed, uint64_t threshold) {
  // Tasks never straddle a 2^32 boundary, so `fold` is constant inside each.
  at::parallel_for(0, numel, kGrain, [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end;) {
      const int64_t boundary = ((b >> 32) + 1) << 32;
      const int64_t e = std::min(end, boundary);
      keep_mask_kernel(mask + b, b, e, seed, threshold);
      b = e;
    }
  });
}

/// y[i] = x[i] * (m[i] * s) for i in [0, n): branch-free so it vectorises (a dropped NaN
/// stays NaN, as with at::dropout's x * noise); cloned for AVX2.
template <class scalar_t, class acc_t>
__attribute__((target_clones("avx2", "default"))) void masked_scale_kernel(const scalar_t* x, const uint8_t* m,
                                                                            acc_t s, scalar_t* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    y[i] = static_cast<scalar_t>(static_cast<acc_t>(x[i]) * (static_cast<acc_t>(m[i]) * s));
}

/// out = in * mask * scale (scale applied in float for reduced precisions).
void apply_mask(const at::Tensor& in, const at::Tensor& mask, double scale, at::Tensor& out) {
  const int64_t n = in.numel();
  const uint8_t* m = mask.data_ptr<uint8_t>();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, in.scalar_type(), "tupe_dropout", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    const scalar_t* x = in.const_data_ptr<scalar_t>();
    scalar_t* y = out.data_ptr<scalar_t>();
    const acc_t s = static_cast<acc_t>(scale);
    at::parallel_for(0, n, kGrain, [&](int64_t begin, int64_t end) {
      masked_scale_kernel<scalar_t, acc_t>(x + begin, m + begin, s, y + begin, end - begin);
    });
  });
}

uint64_t draw_seed() {
  at::Generator gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get<at::CPUGeneratorImpl>()->random64();
}

thread_local DropoutSampleKeys* t_sample_keys = nullptr;

/// The CPU dropout as an autograd function: saves the 1-byte mask, not a float noise tensor.
struct CpuDropout : public torch::autograd::Function<CpuDropout> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x, double p) {
    const at::Tensor in = x.contiguous();
    DropoutSampleKeys* keys = DropoutSampleKeys::current();
    TUPE_CHECK(keys == nullptr || in.numel() % keys->rows() == 0,
               "dropout: an input of " << in.numel() << " elements " << in.sizes() << " is not " << keys->rows()
                                       << " equal per-sample slices (sample-keyed dropout)");
    at::Tensor mask = (keys != nullptr ? dropout_keep_mask_rows(in.numel(), p, keys->next_call_seeds())
                                       : dropout_keep_mask(in.numel(), p, draw_seed()))
                          .view(in.sizes());
    at::Tensor out = at::empty_like(in);
    const double scale = 1.0 / (1.0 - p);
    apply_mask(in, mask, scale, out);
    ctx->saved_data["mask"] = mask;
    ctx->saved_data["scale"] = scale;
    return out;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const at::Tensor mask = ctx->saved_data["mask"].toTensor();
    const double scale = ctx->saved_data["scale"].toDouble();
    const at::Tensor g = grads[0].contiguous();
    at::Tensor gx = at::empty_like(g);
    apply_mask(g, mask, scale, gx);
    return {gx, at::Tensor()};
  }
};

}  // namespace

at::Tensor dropout_keep_mask(int64_t numel, double p, uint64_t seed) {
  TUPE_CHECK(p >= 0.0 && p < 1.0, "dropout: probability " << p << " is outside [0, 1)");
  at::Tensor mask = at::empty({numel}, at::TensorOptions().dtype(at::kByte));
  fill_keep_mask(mask.data_ptr<uint8_t>(), numel, seed, keep_threshold(p));
  return mask;
}

at::Tensor dropout_keep_mask_rows(int64_t numel, double p, const std::vector<uint64_t>& row_seeds) {
  TUPE_CHECK(p >= 0.0 && p < 1.0, "dropout: probability " << p << " is outside [0, 1)");
  const int64_t rows = static_cast<int64_t>(row_seeds.size());
  TUPE_CHECK(rows > 0 && numel % rows == 0,
             "dropout: " << numel << " elements are not " << rows << " equal per-sample slices");
  at::Tensor mask = at::empty({numel}, at::TensorOptions().dtype(at::kByte));
  uint8_t* m = mask.data_ptr<uint8_t>();
  const int64_t per_row = numel / rows;
  const uint64_t threshold = keep_threshold(p);
  // Tasks of the flat range, cut at row ends (a slice's index j restarts at 0) and, inside a
  // row, at 2^32 boundaries (as fill_keep_mask).
  at::parallel_for(0, numel, kGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end;) {
      const int64_t row = i / per_row, j = i - row * per_row;
      const int64_t row_end = std::min(end, (row + 1) * per_row);
      const int64_t e = std::min(row_end, row * per_row + (((j >> 32) + 1) << 32));
      keep_mask_kernel(m + i, j, j + (e - i), row_seeds[static_cast<size_t>(row)], threshold);
      i = e;
    }
  });
  return mask;
}

DropoutSampleKeys::DropoutSampleKeys(uint64_t step_key, std::vector<int64_t> sample_ids)
    : step_key_(step_key), samples_(std::move(sample_ids)), outer_(t_sample_keys) {
  TUPE_CHECK(!samples_.empty(), "sample-keyed dropout: no samples");
  t_sample_keys = this;
}

DropoutSampleKeys::~DropoutSampleKeys() { t_sample_keys = outer_; }

DropoutSampleKeys* DropoutSampleKeys::current() { return t_sample_keys; }

std::vector<uint64_t> DropoutSampleKeys::next_call_seeds() {
  std::vector<uint64_t> seeds(samples_.size());
  const auto call = static_cast<uint64_t>(calls_++);
  for (size_t b = 0; b < samples_.size(); ++b)
    seeds[b] = hash_words({step_key_, call, static_cast<uint64_t>(samples_[b])});
  return seeds;
}

at::Tensor dropout(const at::Tensor& x, double p, bool training) {
  TUPE_CHECK(p >= 0.0 && p < 1.0, "dropout: probability " << p << " is outside [0, 1)");
  if (!training || p == 0.0) return x;
  const auto t = x.scalar_type();
  const bool cpu_kernel = t == at::kFloat || t == at::kDouble || t == at::kBFloat16 || t == at::kHalf;
  if (!x.device().is_cpu() || !cpu_kernel) return at::dropout(x, p, /*train=*/true);
  return CpuDropout::apply(x, p);
}

DropoutImpl::DropoutImpl(double p_) : p(p_) {
  TUPE_CHECK(p >= 0.0 && p < 1.0, "dropout: probability " << p << " is outside [0, 1)");
}

at::Tensor DropoutImpl::forward(const at::Tensor& x) { return model::dropout(x, p, is_training()); }

}  // namespace tupe::model
