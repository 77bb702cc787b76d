#include "trainer/grad_clip.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <cmath>

namespace tupe::trainer {

std::vector<at::Tensor> gradients_of(const NamedTensors& params) {
  std::vector<at::Tensor> out;
  for (const auto& [name, p] : params)
    if (p.grad().defined()) out.push_back(p.grad());
  return out;
}

double global_grad_norm(const std::vector<at::Tensor>& grads) {
  if (grads.empty()) return 0.0;
  c10::NoGradGuard no_grad;
  std::vector<at::Tensor> norms;
  norms.reserve(grads.size());
  for (const at::Tensor& g : grads) norms.push_back(at::linalg_vector_norm(g, 2, std::nullopt, false, at::kFloat));
  // One host sync for the whole list.
  return at::linalg_vector_norm(at::stack(norms), 2).item<double>();
}

double clip_grad_norm(const std::vector<at::Tensor>& grads, double max_norm) {
  const double norm = global_grad_norm(grads);
  if (max_norm > 0 && std::isfinite(norm) && norm > max_norm) {
    c10::NoGradGuard no_grad;
    const double coef = max_norm / (norm + 1e-6);
    for (const at::Tensor& g : grads) {
      at::Tensor grad = g;
      grad.mul_(coef);
    }
  }
  return norm;
}

}  // namespace tupe::trainer
