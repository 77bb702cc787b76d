// The multi-tensor optimizers (trainer/optimizer.cpp) on CUDA: AdamW and LAMB on the GPU
// against the same steps on the CPU, a step cancelled on the device by found_inf = 1
// changes nothing, found_inf = 0 is a plain step, a step never synchronises with the host
// (CUDA's sync debug mode set to error), and the ATen ops a step dispatches stay <= 10.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "dist/device.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/support/op_counter.h"
#include "trainer/optimizer.h"

namespace tupe::gputest {
namespace {

/// 30 parameters like a few encoder layers (biases start at 0) on the CPU, and per-step
/// gradients.
checkpoint::NamedTensors cpu_params() {
  at::manual_seed(71);
  checkpoint::NamedTensors out;
  for (int layer = 0; layer < 6; ++layer) {
    const auto add = [&](const char* leaf, const at::Tensor& t) {
      out.emplace_back("encoder.layers." + std::to_string(layer) + "." + leaf, t);
    };
    add("attention.query.weight", at::randn({32, 16}) * 0.05);
    add("attention.query.bias", at::zeros({32}));
    add("attention_norm.weight", at::ones({16}));
    add("ffn.weight", at::randn({64, 16}) * 0.05);
    add("ffn.bias", at::zeros({64}));
  }
  for (auto& [name, p] : out) p.set_requires_grad(true);
  return out;
}

checkpoint::NamedTensors moved(const checkpoint::NamedTensors& params, const at::Device& device) {
  checkpoint::NamedTensors out;
  for (const auto& [name, p] : params) {
    at::Tensor c = p.detach().to(device).clone();
    c.set_requires_grad(true);
    out.emplace_back(name, c);
  }
  return out;
}

void set_grads(const checkpoint::NamedTensors& params, const std::vector<at::Tensor>& grads) {
  for (size_t i = 0; i < params.size(); ++i) {
    at::Tensor p = params[i].second;
    p.mutable_grad() = grads[i].to(p.device());
  }
}

bool bitwise_equal(const at::Tensor& a, const at::Tensor& b) {
  const at::Tensor ac = a.detach().contiguous().cpu(), bc = b.detach().contiguous().cpu();
  return ac.sizes() == bc.sizes() && ac.scalar_type() == bc.scalar_type() &&
         (ac.numel() == 0 || std::memcmp(ac.data_ptr(), bc.data_ptr(), ac.numel() * ac.element_size()) == 0);
}

checkpoint::NamedTensors snapshot(const checkpoint::NamedTensors& params, const trainer::Optimizer& opt) {
  checkpoint::NamedTensors out;
  for (const auto& [name, p] : params) out.emplace_back(name, p.detach().cpu().clone());
  for (const auto& [name, t] : opt.state_dict().tensors) out.emplace_back(name, t.cpu().clone());
  return out;
}

TEST(CudaOptimizer, MatchesTheCpuCancelsOnTheDeviceAndNeverSyncs) {
  TUPE_REQUIRE_CUDA();
  const at::Device device = dist::resolve_device(env(), dist::DeviceRequest::kCuda, "test device");
  const checkpoint::NamedTensors cpu_template = cpu_params();
  for (trainer::OptimizerKind kind : {trainer::OptimizerKind::kAdamW, trainer::OptimizerKind::kLamb}) {
    const char* name = kind == trainer::OptimizerKind::kLamb ? "LAMB" : "AdamW";
    trainer::OptimizerOptions o;
    o.optimizer = kind;
    o.weight_decay = 0.1;
    const checkpoint::NamedTensors cpu = moved(cpu_template, at::kCPU), gpu = moved(cpu_template, device);
    auto cpu_opt = trainer::make_optimizer(cpu, o), gpu_opt = trainer::make_optimizer(gpu, o);
    const at::Tensor zero_cpu = at::zeros({}, at::kFloat), one_gpu = at::ones({}, at::TensorOptions().device(device));
    const at::Tensor zero_gpu = at::zeros({}, at::TensorOptions().device(device));
    double worst = 0;
    for (int k = 0; k < 5; ++k) {
      std::vector<at::Tensor> grads;
      for (const auto& [n, p] : cpu) grads.push_back(at::randn(p.sizes()) * (0.01 * (k + 1)));
      if (k == 2) {  // inf/NaN grads, cancelled on the device: nothing may change
        grads[0].view(-1)[0] = std::numeric_limits<float>::infinity();
        grads[1].view(-1)[0] = std::numeric_limits<float>::quiet_NaN();
        set_grads(gpu, grads);
        const checkpoint::NamedTensors before = snapshot(gpu, *gpu_opt);
        {
          NoSyncScope no_sync;
          gpu_opt->step(1e-3, one_gpu);
        }
        const checkpoint::NamedTensors after = snapshot(gpu, *gpu_opt);
        for (size_t i = 0; i < before.size(); ++i)
          EXPECT_TRUE(bitwise_equal(after[i].second, before[i].second)) << name << " cancelled: " << before[i].first;
        continue;
      }
      set_grads(cpu, grads);
      set_grads(gpu, grads);
      const bool with_found_inf = k % 2 == 1;
      with_found_inf ? cpu_opt->step(1e-3, zero_cpu) : cpu_opt->step(1e-3);
      ::tupe::testing::OpCounter counter;
      {
        NoSyncScope no_sync;
        with_found_inf ? gpu_opt->step(1e-3, zero_gpu) : gpu_opt->step(1e-3);
      }
      counter.stop();
      EXPECT_LE(counter.total(), 10) << name << ": " << counter.summary();
      if (k == 0) std::printf("[ measured ] %s CUDA step: %lld ATen ops\n", name, static_cast<long long>(counter.total()));
      // Different kernels (reduction order, fused multiply-adds) in float32: a few ulps per step.
      for (size_t i = 0; i < cpu.size(); ++i) {
        const double e = relative_error(gpu[i].second.detach(), cpu[i].second.detach(), 1e-2);
        worst = std::max(worst, e);
        EXPECT_LE(e, 1e-5) << name << " " << cpu[i].first << " step " << k + 1;
      }
    }
    const auto a = cpu_opt->state_dict(), b = gpu_opt->state_dict();
    ASSERT_EQ(a.tensors.size(), b.tensors.size());
    for (size_t i = 0; i < a.tensors.size(); ++i) {
      if (a.tensors[i].first.find("/step") == std::string::npos) continue;
      EXPECT_TRUE(at::equal(a.tensors[i].second, b.tensors[i].second)) << a.tensors[i].first;  // 4, not 5
    }
    std::printf("[ measured ] %s on CUDA vs CPU over 4 steps (+1 cancelled): max relative error %.3g\n", name, worst);
  }
}

}  // namespace
}  // namespace tupe::gputest
