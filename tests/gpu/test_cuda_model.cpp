// The model on CUDA computes what it computes on the CPU: logits and every parameter's
// gradient of the MLM loss, for each positional variant, in fp32 (TF32 off: relative error
// <= 1e-4) and under bf16 autocast (<= 2e-2 against the fp32 CPU run); and which SDPA
// kernel serves TUPE's additive bias on this GPU (printed, for bench/RESULTS.md).
#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <string>

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
                             {PositionEncoding::kTupeRelative, false, "TUPE-R tied [CLS]"}};

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

const char* sdp_backend_name(int64_t b) {
  switch (b) {
    case 0: return "math (unfused)";
    case 1: return "flash attention";
    case 2: return "memory-efficient attention";
    case 3: return "cuDNN attention";
    case 4: return "overrideable";
    default: return "none (error)";
  }
}

TEST(CudaSdpa, ReportsTheKernelForTupesAdditiveBias) {
  TUPE_REQUIRE_CUDA();
  const at::Device cuda(at::kCUDA, 0);
  const auto opts = at::TensorOptions().device(cuda).dtype(at::kBFloat16);
  const int64_t B = 32, H = 12, L = 128, dh = 64;  // BERT-Base at sequence 128
  const at::Tensor q = at::randn({B, H, L, dh}, opts), k = at::randn({B, H, L, dh}, opts),
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
      const int64_t backend = at::_fused_sdp_choice(q, k, v, c.mask, dropout, /*is_causal=*/false,
                                                    /*scale=*/1.0 / std::sqrt(2.0 * dh), /*enable_gqa=*/false);
      std::printf("SDPA backend, bf16, %-42s dropout %.1f: %s\n", c.what, dropout, sdp_backend_name(backend));
      EXPECT_GE(backend, 0) << c.what;
    }
  }
}

}  // namespace
}  // namespace tupe::gputest
