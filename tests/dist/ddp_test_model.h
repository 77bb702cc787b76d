// A small model for the DDP tests: three Linear layers with tanh, optionally registered in
// an order different from the order forward uses them, optionally with an unused layer.
// Inputs and targets are a pure function of (seed, rank, micro-step), so every rank can
// recompute every other rank's batch; the reference gradients are computed in float64.
#pragma once
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>

#include <map>
#include <string>
#include <vector>

#include "dist/grad_buffer.h"

namespace tupe::dist::mpitest {

constexpr int64_t kIn = 8, kHidden = 16, kOut = 4, kBatch = 6;

struct NetImpl : torch::nn::Module {
  /// shuffled: registration order l3, l1, l2 (forward still l1 -> l2 -> l3), so gradients
  /// become ready out of layout order. with_unused: a layer forward never touches.
  NetImpl(bool shuffled, bool with_unused) {
    if (shuffled) {
      l3 = register_module("l3", torch::nn::Linear(kHidden, kOut));
      l1 = register_module("l1", torch::nn::Linear(kIn, kHidden));
      l2 = register_module("l2", torch::nn::Linear(kHidden, kHidden));
    } else {
      l1 = register_module("l1", torch::nn::Linear(kIn, kHidden));
      l2 = register_module("l2", torch::nn::Linear(kHidden, kHidden));
      l3 = register_module("l3", torch::nn::Linear(kHidden, kOut));
    }
    if (with_unused) unused = register_module("unused", torch::nn::Linear(kOut, kOut));
  }
  /// x: [B, kIn] -> [B, kOut]
  at::Tensor forward(const at::Tensor& x) { return l3(at::tanh(l2(at::tanh(l1(x))))); }

  torch::nn::Linear l1{nullptr}, l2{nullptr}, l3{nullptr}, unused{nullptr};
};
TORCH_MODULE(Net);

inline at::Generator generator(int64_t seed) { return at::make_generator<at::CPUGeneratorImpl>(seed); }

/// Overwrites every parameter with N(0, 0.5^2) values drawn from `seed`.
inline void init_params(torch::nn::Module& m, int64_t seed) {
  at::NoGradGuard no_grad;
  auto gen = generator(seed);
  for (auto& p : m.parameters()) p.copy_(at::randn(p.sizes(), gen, at::kDouble).mul(0.5).to(p.scalar_type()));
}

inline std::vector<NamedParameter> named_params(torch::nn::Module& m) {
  std::vector<NamedParameter> out;
  for (auto& item : m.named_parameters()) out.push_back({item.key(), item.value()});
  return out;
}

/// Batch of rank `rank` at micro-step `micro`: inputs [kBatch, kIn], targets [kBatch, kOut].
inline std::pair<at::Tensor, at::Tensor> batch(int64_t seed, int64_t rank, int64_t micro) {
  auto gen = generator(seed * 1000003 + rank * 1009 + micro);
  at::Tensor x = at::randn({kBatch, kIn}, gen, at::kDouble);
  at::Tensor y = at::randn({kBatch, kOut}, gen, at::kDouble);
  return {x, y};
}

/// Sum-of-squares loss 0.5 * sum (f(x) - y)^2: a SUM over samples, so micro-steps add up.
inline at::Tensor loss(Net& net, const at::Tensor& x, const at::Tensor& y) {
  const auto dtype = net->l1->weight.scalar_type();
  return net->forward(x.to(dtype)).sub(y.to(dtype)).pow(2).sum().mul(0.5);
}

/// Float64 reference: per parameter name, the sum and the sum of absolute values over the
/// given (rank, micro) batches of each batch's gradient, for parameters drawn from `init_seed`.
struct Reference {
  std::map<std::string, at::Tensor> sum, abs_sum;
};
inline Reference reference_grads(bool shuffled, bool with_unused, int64_t init_seed, int64_t data_seed,
                                 const std::vector<std::pair<int64_t, int64_t>>& batches) {
  Net ref(shuffled, with_unused);
  ref->to(at::kDouble);
  init_params(*ref, init_seed);
  Reference out;
  for (auto& item : ref->named_parameters()) {
    out.sum[item.key()] = at::zeros_like(item.value());
    out.abs_sum[item.key()] = at::zeros_like(item.value());
  }
  for (const auto& [rank, micro] : batches) {
    for (auto& p : ref->parameters()) p.mutable_grad() = at::Tensor();
    auto [x, y] = batch(data_seed, rank, micro);
    loss(ref, x, y).backward();
    for (auto& item : ref->named_parameters()) {
      if (!item.value().grad().defined()) continue;
      out.sum[item.key()] += item.value().grad();
      out.abs_sum[item.key()] += item.value().grad().abs();
    }
  }
  return out;
}

}  // namespace tupe::dist::mpitest
