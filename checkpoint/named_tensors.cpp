#include "checkpoint/named_tensors.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <map>
#include <sstream>

#include "common/error.h"

namespace tupe::checkpoint {

at::Tensor find_tensor(const NamedTensors& tensors, const std::string& name) {
  for (const auto& [n, t] : tensors)
    if (n == name) return t;
  return {};
}

std::string shape_text(at::IntArrayRef sizes) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < sizes.size(); ++i) os << (i ? ", " : "") << sizes[i];
  os << "]";
  return os.str();
}

void copy_named_tensors(const NamedTensors& targets, const NamedTensors& source, const std::string& where) {
  std::map<std::string, const at::Tensor*> by_name;
  std::vector<std::string> problems;
  for (const auto& [name, t] : source)
    if (!by_name.emplace(name, &t).second) problems.push_back("duplicate saved name " + name);
  std::map<std::string, bool> seen;
  for (const auto& [name, target] : targets) {
    seen[name] = true;
    auto it = by_name.find(name);
    if (it == by_name.end()) {
      problems.push_back("missing: " + name);
    } else if (it->second->sizes() != target.sizes()) {
      problems.push_back("shape of " + name + ": saved " + shape_text(it->second->sizes()) + " vs current " +
                         shape_text(target.sizes()));
    } else if (at::isFloatingType(target.scalar_type()) && !at::isFloatingType(it->second->scalar_type())) {
      problems.push_back("dtype of " + name + ": saved " + std::string(c10::toString(it->second->scalar_type())) +
                         " vs current " + c10::toString(target.scalar_type()) + " (integers into a float tensor)");
    }
  }
  for (const auto& [name, t] : source)
    if (!seen.count(name)) problems.push_back("unexpected: " + name);
  if (!problems.empty()) {
    std::ostringstream os;
    for (size_t i = 0; i < problems.size(); ++i) os << (i ? "; " : "") << problems[i];
    TUPE_FAIL(where << ": " << problems.size() << " tensor name/shape/dtype mismatch(es): " << os.str());
  }
  c10::NoGradGuard no_grad;
  for (const auto& [name, target] : targets) {
    at::Tensor dst = target;  // shares storage
    dst.copy_(*by_name.at(name));
  }
}

}  // namespace tupe::checkpoint
