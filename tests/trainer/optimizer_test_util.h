// Shared inputs of the optimizer tests (test_optimizers.cpp, test_optimizers_multi.cpp):
// a small named parameter set shaped like part of TUPE-BERT, seeded gradients with one
// missing grad, and the options every test uses.
#pragma once
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <string>
#include <utility>
#include <vector>

#include "checkpoint/named_tensors.h"
#include "trainer/options.h"

namespace tupe::trainer::testing {

/// A small named parameter set shaped like (part of) TUPE-BERT.
inline const std::vector<std::pair<std::string, std::vector<int64_t>>> kShapes = {
    {"encoder.layers.0.attention.query.weight", {8, 6}},
    {"encoder.layers.0.attention.query.bias", {8}},
    {"encoder.layers.0.attention_norm.weight", {6}},
    {"encoder.embeddings.word.weight", {10, 6}},
};
constexpr int kSteps = 6;
/// Parameter 3 (the word embedding) gets no gradient in this step (grad = None in PyTorch).
constexpr int kStepWithoutWordGrad = 2;

inline OptimizerOptions test_options(OptimizerKind kind) {
  OptimizerOptions o;
  o.optimizer = kind;
  o.lr = 1e-2;
  o.beta1 = 0.9;
  o.beta2 = 0.999;
  o.eps = 1e-6;
  o.weight_decay = 0.1;
  o.warmup_steps = 2;
  o.total_steps = 8;
  return o;
}

/// kShapes as leaf parameters of `dtype` (standard normal, from `seed`).
inline checkpoint::NamedTensors make_params(at::ScalarType dtype, uint64_t seed) {
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  checkpoint::NamedTensors out;
  for (const auto& [name, shape] : kShapes) {
    at::Tensor p = at::randn(shape, gen, at::kFloat).to(dtype);
    p.set_requires_grad(true);
    out.emplace_back(name, p);
  }
  return out;
}

/// grads[k][i]: gradient of parameter i in step k (float32; undefined = no grad).
inline std::vector<std::vector<at::Tensor>> make_grads(uint64_t seed) {
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  std::vector<std::vector<at::Tensor>> out(kSteps);
  for (int k = 0; k < kSteps; ++k)
    for (size_t i = 0; i < kShapes.size(); ++i) {
      at::Tensor g = at::randn(kShapes[i].second, gen, at::kFloat) * (0.3 * (k + 1));
      out[k].push_back(i == 3 && k == kStepWithoutWordGrad ? at::Tensor() : g);
    }
  return out;
}

/// Sets params[i].grad to grads[i] in the parameter's dtype (undefined: no grad).
inline void set_grads(const checkpoint::NamedTensors& params, const std::vector<at::Tensor>& grads) {
  for (size_t i = 0; i < params.size(); ++i) {
    at::Tensor p = params[i].second;
    p.mutable_grad() = grads[i].defined() ? grads[i].to(p.scalar_type()) : at::Tensor();
  }
}

/// Detached copies of `params` (same names, dtype `dtype`) as fresh leaf tensors.
inline checkpoint::NamedTensors clone_params(const checkpoint::NamedTensors& params, at::ScalarType dtype) {
  checkpoint::NamedTensors out;
  for (const auto& [name, p] : params) {
    at::Tensor c = p.detach().to(dtype).clone();
    c.set_requires_grad(true);
    out.emplace_back(name, c);
  }
  return out;
}

}  // namespace tupe::trainer::testing
