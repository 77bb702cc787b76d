// The model on CUDA computes what it computes on the CPU: logits and every parameter's
// gradient of the MLM loss, for each positional variant, in fp32 (TF32 off: relative error
// <= 1e-4) and under bf16 autocast (<= 2e-2 against the fp32 CPU run); that the SDPA kernel
// a training forward picks for a bias that needs a gradient is never cuDNN (its backward gives
// the bias no gradient; printed with torch's own choice, for bench/RESULTS.md), and that the
// bias then gets the math kernel's gradient; and that masked training attention stays finite
// at the lengths of cuDNN's NaN case (model/attention.h).
#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <string>

#include "model/attention.h"
#include "model/sdpa_kernels.h"
#include "model/tupe_bert.h"
#include "tests/gpu/gpu_test_util.h"
#include "trainer/autocast.h"

namespace tupe::gputest {
namespace {

using model::PositionEncoding;

struct Variant {
  PositionEncoding pe;
  bool untie_cls;
  const char* name;
};
const Variant kVariants[] = {{PositionEncoding::kBertAbsolute, false, "BERT-A"},
                             {PositionEncoding::kBertRelative, false, "BERT-R"},
                             {PositionEncoding::kTupeAbsolute, true, "TUPE-A"},
                             {PositionEncoding::kTupeRelative, true, "TUPE-R"},
                             {PositionEncoding::kTupeRelative, false, "TUPE-R tied [CLS]"},
                             {PositionEncoding::kBertAbsoluteUntied, false, "BERT-A^d"}};

/// Logits and gradients of sum-CE over the masked tokens on `device` (autocast `amp`).
struct Result {
  at::Tensor logits;
  std::map<std::string, at::Tensor> grads;
};

Result run(model::TupeBertImpl& net, const MlmBatch& cpu_batch, const at::Device& device, at::ScalarType amp) {
  const MlmBatch b = cpu_batch.to(device);
  net.zero_grad();
  at::Tensor logits;
  {
    trainer::AutocastScope autocast(device.type(), amp);
    logits = net.mlm_logits(b.input_ids, b.attention_mask, b.segment_ids, b.masked_positions);
  }
  at::cross_entropy_loss(logits.to(at::kFloat), b.masked_labels, {}, at::Reduction::Sum).backward();
  Result r;
  r.logits = logits.detach().to(at::kCPU, at::kFloat);
  for (const auto& p : net.named_parameters()) r.grads[p.key()] = p.value().grad().detach().to(at::kCPU);
  return r;
}

/// A model of `v` on the CPU with N(0, 0.2) parameters (seeded) and its copy on cuda:0.
std::pair<model::TupeBert, model::TupeBert> twin_models(const Variant& v) {
  const auto config = small_config(v.pe, v.untie_cls);
  at::manual_seed(7);
  model::TupeBert cpu(config), gpu(config);
  at::NoGradGuard no_grad;
  for (auto& p : cpu->parameters()) p.normal_(0.0, 0.2);
  auto src = cpu->named_parameters();
  for (auto& p : gpu->named_parameters()) p.value().copy_(src[p.key()]);
  gpu->to(at::Device(at::kCUDA, 0));
  cpu->train();
  gpu->train();
  return {cpu, gpu};
}

double relative_l2(const at::Tensor& a, const at::Tensor& b) {
  const at::Tensor x = a.to(at::kCPU, at::kDouble), y = b.to(at::kCPU, at::kDouble);
  return ((x - y).norm() / y.norm()).item<double>();
}

class TF32Off {  // fp32 matmuls in full fp32 on the GPU for the fp32 comparison
 public:
  TF32Off() : saved_(at::globalContext().allowTF32CuBLAS()) { at::globalContext().setAllowTF32CuBLAS(false); }
  ~TF32Off() { at::globalContext().setAllowTF32CuBLAS(saved_); }

 private:
  bool saved_;
};

TEST(CudaModel, ForwardAndBackwardMatchCpuInFp32) {
  TUPE_REQUIRE_CUDA();
  TF32Off tf32_off;
  const MlmBatch batch = make_batch(11);
  for (const Variant& v : kVariants) {
    auto [cpu, gpu] = twin_models(v);
    const Result a = run(*cpu, batch, at::Device(at::kCPU), at::kFloat);
    const Result g = run(*gpu, batch, at::Device(at::kCUDA, 0), at::kFloat);
    const double logit_err = relative_error(g.logits, a.logits);
    EXPECT_LE(logit_err, 1e-4) << v.name << " logits";
    double worst = 0;
    std::string worst_name;
    for (const auto& [name, grad] : a.grads) {
      const double e = relative_error(g.grads.at(name), grad);
      if (e > worst) worst = e, worst_name = name;
    }
    EXPECT_LE(worst, 1e-4) << v.name << " gradient of " << worst_name;
    std::printf("%-18s fp32 CUDA vs CPU: logits %.2e, worst gradient %.2e (%s)\n", v.name, logit_err, worst,
                worst_name.c_str());
  }
}

TEST(CudaModel, Bf16AutocastStaysCloseToFp32Cpu) {
  TUPE_REQUIRE_CUDA();
  const MlmBatch batch = make_batch(12);
  for (const Variant& v : kVariants) {
    auto [cpu, gpu] = twin_models(v);
    const Result a = run(*cpu, batch, at::Device(at::kCPU), at::kFloat);
    const Result g = run(*gpu, batch, at::Device(at::kCUDA, 0), at::kBFloat16);
    // bf16 rounds every matmul input to 8 significant bits, so single elements can stray
    // further; the bound is on the relative L2 distance ||x - y|| / ||y||.
    const double logit_err = relative_l2(g.logits, a.logits);
    EXPECT_LE(logit_err, 2e-2) << v.name << " bf16 logits";
    // Gradients as one vector over all parameters (per-tensor noise on tiny tensors says
    // little): relative L2 distance.
    at::Tensor num = at::zeros({}, at::kDouble), den = at::zeros({}, at::kDouble);
    for (const auto& [name, grad] : a.grads) {
      num += (g.grads.at(name).to(at::kDouble) - grad.to(at::kDouble)).pow(2).sum();
      den += grad.to(at::kDouble).pow(2).sum();
    }
    const double grad_err = std::sqrt(num.item<double>() / den.item<double>());
    EXPECT_LE(grad_err, 2e-2) << v.name << " bf16 gradients";
    std::printf("%-18s bf16 CUDA vs fp32 CPU (relative L2): logits %.2e, gradients %.2e; logits max %.2e\n", v.name,
                logit_err, grad_err, relative_error(g.logits, a.logits));
  }
}

TEST(CudaSdpa, ABiasThatNeedsAGradientNeverGetsCudnn) {
  TUPE_REQUIRE_CUDA();
  const at::Device cuda(at::kCUDA, 0);
  const auto opts = at::TensorOptions().device(cuda).dtype(at::kBFloat16);
  const int64_t B = 32, H = 12, L = 128, dh = 64;  // BERT-Base at sequence 128
  const double scale = 1.0 / std::sqrt(2.0 * dh);  // TUPE's 1/sqrt(2 d_h)
  const at::Tensor q = at::randn({B, H, L, dh}, opts).requires_grad_(true), k = at::randn({B, H, L, dh}, opts),
                   v = at::randn({B, H, L, dh}, opts);
  struct Case {
    const char* what;
    at::Tensor mask;
  };
  const Case cases[] = {
      {"TUPE-R: (B, H, L, L) bias, needs grad", at::randn({B, H, L, L}, opts).requires_grad_(true)},
      {"TUPE-A/R at inference: (1, H, L, L) bias", at::randn({1, H, L, L}, opts)},
      {"BERT-A: (B, 1, 1, L) padding mask", at::zeros({B, 1, 1, L}, opts)},
      {"no mask", at::Tensor()},
  };
  for (const Case& c : cases) {
    for (double dropout : {0.0, 0.1}) {
      // torch's own choice, and what tupe's forward runs with each setting of its switch.
      const std::string torch_choice = model::sdpa_choice(q, k, v, c.mask, dropout, scale);
      for (const bool avoid : {false, true}) {
        const std::string got = model::training_sdpa_choice(q, k, v, c.mask, dropout, scale, avoid);
        std::printf("SDPA, bf16, %-42s dropout %.1f, avoid_cudnn_in_training %d: tupe %s (torch alone: %s)\n", c.what,
                    dropout, avoid ? 1 : 0, got.c_str(), torch_choice.c_str());
        EXPECT_NE(got, "none") << c.what;
        if (c.mask.defined() && c.mask.requires_grad()) {
          EXPECT_NE(got, "cudnn_attention") << c.what << ": cuDNN's backward gives attn_bias no gradient";
        }
        if (c.mask.defined() && avoid) {
          EXPECT_NE(got, "cudnn_attention") << c.what << ", avoid_cudnn_in_training on";
        }
      }
    }
  }
}

TEST(CudaSdpa, TupesBiasGetsItsGradientWithCudnnAllowed) {
  TUPE_REQUIRE_CUDA();
  // What variant_step_bench --sdpa default runs: avoid_cudnn_in_training off, cuDNN allowed,
  // TUPE's (B, H, L, L) bias needing a gradient. The forward must pick a kernel whose
  // backward differentiates the bias (the memory-efficient one, or math), and the bias
  // gradient must match the math kernel's.
  const at::Device cuda(at::kCUDA, 0);
  model::ModelOptions c = small_config(model::PositionEncoding::kTupeRelative, true);
  c.hidden_size = 256;
  c.num_heads = 4;  // d_h = 64
  c.attention_dropout = 0.0;
  c.max_positions = 128;
  model::SelfAttention attn(c);
  attn->to(cuda);
  attn->train();
  attn->avoid_cudnn_in_training = false;
  at::manual_seed(5);
  const int64_t B = 4, L = 128;
  const at::Tensor x = at::randn({B, L, c.hidden_size}).to(cuda);
  const at::Tensor bias0 = (at::randn({B, c.num_heads, L, L}) * 0.5).to(cuda, at::kBFloat16);
  const at::Tensor g = at::randn({B, L, c.hidden_size}).to(cuda);
  const auto bias_grad = [&](bool math) {
    std::optional<model::SdpaKernelPin> pin;
    if (math) pin.emplace(model::SdpaKernel::kMath);
    at::Tensor bias = bias0.clone().requires_grad_(true);
    at::Tensor out;
    {
      trainer::AutocastScope autocast(at::kCUDA, at::kBFloat16);
      out = attn->forward(x, bias);
    }
    (out.to(at::kFloat) * g).sum().backward();
    EXPECT_TRUE(bias.grad().defined()) << (math ? "math" : "torch's choice") << ": no gradient for the bias";
    return bias.grad().defined() ? bias.grad().to(at::kCPU, at::kFloat) : at::Tensor();
  };
  const at::Tensor got = bias_grad(false), want = bias_grad(true);
  ASSERT_TRUE(got.defined() && want.defined());
  EXPECT_EQ((~at::isfinite(got)).sum().item<int64_t>(), 0);
  const double err = (got - want).norm().item<double>() / std::max(want.norm().item<double>(), 1e-6);
  EXPECT_LE(err, 5e-2) << "bias gradient, fused kernel vs math, relative L2";
  std::printf("TUPE bias gradient with cuDNN allowed: relative L2 vs math %.2e\n", err);
}

/// One masked training forward + backward of a one-head attention layer under bf16 autocast
/// whose logits are all about -120 (so every query row's logsumexp is far below -88.7, the
/// condition of the cuDNN NaN case), with BERT-A's (B, 1, 1, L) padding mask. Returns the
/// gradient of x (float32, CPU).
at::Tensor masked_attention_grad(model::SelfAttention& attn, int64_t L, bool avoid_cudnn) {
  const at::Device cuda(at::kCUDA, 0);
  attn->avoid_cudnn_in_training = avoid_cudnn;
  at::manual_seed(3);
  const int64_t B = 2, d = attn->config.hidden_size;
  at::Tensor x = (at::randn({B, L, d}) * 0.1).to(cuda);
  x.select(2, 0).fill_(1.0);
  x.requires_grad_(true);
  at::Tensor real = at::ones({B, L}, at::kBool);
  real[1].slice(0, L - 5).fill_(false);  // row 1: the last 5 keys are padding
  const at::Tensor mask = at::zeros({B, 1, 1, L})
                              .masked_fill(real.logical_not().view({B, 1, 1, L}), -INFINITY)
                              .to(cuda, at::kBFloat16);
  const at::Tensor g = at::randn({B, L, d}).to(cuda);
  at::Tensor out;
  {
    trainer::AutocastScope autocast(at::kCUDA, at::kBFloat16);
    out = attn->forward(x, mask);
  }
  (out.to(at::kFloat) * g).sum().backward();
  return x.grad().to(at::kCPU, at::kFloat);
}

TEST(CudaSdpa, MaskedTrainingStaysFiniteAtTheCudnnNanLengths) {
  TUPE_REQUIRE_CUDA();
  const at::Device cuda(at::kCUDA, 0);
  model::ModelOptions c = small_config(model::PositionEncoding::kBertAbsolute, false);
  c.hidden_size = 64;
  c.num_heads = 1;  // d_h = 64, scale 1/8
  c.attention_dropout = 0.0;
  for (int64_t L : {64, 192, 320, 704}) {  // L % 128 == 64
    c.max_positions = L;
    model::SelfAttention attn(c);
    {
      at::NoGradGuard no_grad;
      attn->query->weight.mul_(0.1).select(0, 0).zero_();
      attn->query->weight[0][0] = 1.0;     // q_0 = x_0 = 1
      attn->key->weight.mul_(0.1).select(0, 0).zero_();
      attn->key->weight[0][0] = -960.0;    // k_0 = -960: q.k / 8 ~ -120 for every pair
    }
    attn->to(cuda);
    attn->train();
    const at::Tensor got = masked_attention_grad(attn, L, /*avoid_cudnn=*/true);
    const int64_t bad = (~at::isfinite(got)).sum().item<int64_t>();
    EXPECT_EQ(bad, 0) << "L = " << L << ": non-finite input gradients on tupe's training path";
    // The same inputs through the unfused math kernel: the reference for the fused kernel.
    at::Tensor want;
    {
      const model::SdpaKernelPin math(model::SdpaKernel::kMath);
      want = masked_attention_grad(attn, L, /*avoid_cudnn=*/true);
    }
    const double err = (got - want).norm().item<double>() / std::max(want.norm().item<double>(), 1e-6);
    EXPECT_LE(err, 5e-2) << "L = " << L << ": fused kernel vs math, relative L2 error";
    // What torch alone would run (cuDNN allowed), and whether it produces the NaN: printed only,
    // since it depends on the torch and cuDNN versions of the host.
    const at::Tensor torch_default = masked_attention_grad(attn, L, /*avoid_cudnn=*/false);
    const auto opts = at::TensorOptions().device(cuda).dtype(at::kBFloat16);
    const at::Tensor q = at::randn({2, 1, L, 64}, opts).requires_grad_(), kv = at::randn({2, 1, L, 64}, opts);
    const at::Tensor pad = at::zeros({2, 1, 1, L}, opts);
    const std::string torch_kernel = model::sdpa_choice(q, kv, kv, pad, 0.0, 0.125);
    const std::string tupe_kernel = model::training_sdpa_choice(q, kv, kv, pad, 0.0, 0.125, /*avoid=*/true);
    EXPECT_NE(tupe_kernel, "cudnn_attention") << "L = " << L << ": avoid_cudnn_in_training is on";
    std::printf("masked bf16 training attention, L %4lld: tupe (%s) non-finite %lld, vs math %.2e; torch's default "
                "(%s) non-finite %lld\n",
                static_cast<long long>(L), tupe_kernel.c_str(), static_cast<long long>(bad), err, torch_kernel.c_str(),
                static_cast<long long>((~at::isfinite(torch_default)).sum().item<int64_t>()));
  }
}

}  // namespace
}  // namespace tupe::gputest
