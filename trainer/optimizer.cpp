#include "trainer/optimizer.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <cctype>
#include <cmath>
#include <set>

#include "common/error.h"

namespace tupe::trainer {

namespace {
constexpr char kStateFormatVersion[] = "1";
}  // namespace

bool default_weight_decay(const std::string& name) {
  const size_t dot = name.rfind('.');
  const std::string last = dot == std::string::npos ? name : name.substr(dot + 1);
  if (last == "bias") return false;
  std::string lower = name;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  // Any component containing "norm": norm, attention_norm, LayerNorm, layer_norm, ...
  size_t begin = 0;
  while (begin <= lower.size()) {
    size_t end = lower.find('.', begin);
    if (end == std::string::npos) end = lower.size();
    if (lower.substr(begin, end - begin).find("norm") != std::string::npos) return false;
    begin = end + 1;
  }
  return true;
}

Optimizer::Optimizer(const NamedTensors& params, const OptimizerOptions& options, const DecayRule& decay)
    : options_(options) {
  options_.validate();
  std::set<std::string> names;
  for (const auto& [name, p] : params) {
    TUPE_CHECK(names.insert(name).second, "optimizer: duplicate parameter name '" << name << "'");
    TUPE_CHECK(p.defined() && (p.scalar_type() == at::kFloat || p.scalar_type() == at::kDouble),
               "optimizer: parameter '" << name << "' must be a float32 (master) or float64 tensor, got "
                                        << (p.defined() ? c10::toString(p.scalar_type()) : "undefined"));
    Slot s;
    s.name = name;
    s.param = p;
    s.exp_avg = at::zeros_like(p, at::MemoryFormat::Contiguous);
    s.exp_avg_sq = at::zeros_like(p, at::MemoryFormat::Contiguous);
    s.decay = decay ? decay(name) : true;
    slots_.push_back(std::move(s));
  }
}

void Optimizer::step(double lr) {
  TUPE_CHECK(std::isfinite(lr) && lr >= 0, "optimizer: learning rate must be finite and >= 0, got " << lr);
  c10::NoGradGuard no_grad;
  for (Slot& s : slots_) {
    const at::Tensor& grad = s.param.grad();
    if (!grad.defined()) continue;
    TUPE_CHECK(grad.sizes() == s.param.sizes() && grad.scalar_type() == s.param.scalar_type() &&
                   grad.device() == s.param.device(),
               "optimizer: grad of '" << s.name << "' is " << c10::toString(grad.scalar_type())
                                      << shape_text(grad.sizes()) << " on " << grad.device() << ", parameter is "
                                      << c10::toString(s.param.scalar_type()) << shape_text(s.param.sizes()) << " on "
                                      << s.param.device() << " (unscale into fp32 master grads first)");
    ++s.step;
    update(s, grad, lr);
  }
}

void Optimizer::zero_grad() {
  c10::NoGradGuard no_grad;
  for (Slot& s : slots_) {
    at::Tensor g = s.param.grad();
    if (g.defined()) g.zero_();
  }
}

bool Optimizer::decays(const std::string& name) const {
  for (const Slot& s : slots_)
    if (s.name == name) return s.decay;
  TUPE_FAIL("optimizer: no parameter named '" << name << "'");
}

OptimizerState Optimizer::state_dict() const {
  OptimizerState out;
  for (const Slot& s : slots_) {
    out.tensors.emplace_back(s.name + "/exp_avg", s.exp_avg);
    out.tensors.emplace_back(s.name + "/exp_avg_sq", s.exp_avg_sq);
    out.tensors.emplace_back(s.name + "/step", at::scalar_tensor(s.step, at::kLong));
  }
  out.metadata = {{"optimizer", kind()},
                  {"format_version", kStateFormatVersion},
                  {"beta1", format_double(options_.beta1)},
                  {"beta2", format_double(options_.beta2)},
                  {"eps", format_double(options_.eps)},
                  {"weight_decay", format_double(options_.weight_decay)}};
  return out;
}

void Optimizer::load_state_dict(const OptimizerState& state) {
  auto kind_it = state.metadata.find("optimizer");
  TUPE_CHECK(kind_it != state.metadata.end(), "optimizer state: metadata has no 'optimizer' kind");
  TUPE_CHECK(kind_it->second == kind(),
             "optimizer state: saved by '" << kind_it->second << "', cannot load into '" << kind() << "'");
  auto ver_it = state.metadata.find("format_version");
  TUPE_CHECK(ver_it != state.metadata.end() && ver_it->second == kStateFormatVersion,
             "optimizer state: format_version '" << (ver_it == state.metadata.end() ? "(absent)" : ver_it->second)
                                                 << "', expected '" << kStateFormatVersion << "'");
  // Load into fresh tensors first, so that a failing load leaves this optimizer unchanged.
  NamedTensors targets;
  std::vector<at::Tensor> steps;
  for (const Slot& s : slots_) {
    targets.emplace_back(s.name + "/exp_avg", at::empty_like(s.exp_avg));
    targets.emplace_back(s.name + "/exp_avg_sq", at::empty_like(s.exp_avg_sq));
    steps.push_back(at::zeros({}, at::kLong));
    targets.emplace_back(s.name + "/step", steps.back());
  }
  copy_named_tensors(targets, state.tensors, "optimizer state");
  for (size_t i = 0; i < slots_.size(); ++i) {
    const int64_t t = steps[i].item<int64_t>();
    TUPE_CHECK(t >= 0, "optimizer state: '" << slots_[i].name << "/step' is negative (" << t << ")");
    slots_[i].exp_avg = targets[3 * i].second;
    slots_[i].exp_avg_sq = targets[3 * i + 1].second;
    slots_[i].step = t;
  }
}

void AdamW::update(Slot& s, const at::Tensor& grad, double lr) {
  const double beta1 = options_.beta1, beta2 = options_.beta2;
  if (s.decay && options_.weight_decay != 0) s.param.mul_(1 - lr * options_.weight_decay);
  s.exp_avg.lerp_(grad, 1 - beta1);
  s.exp_avg_sq.mul_(beta2).addcmul_(grad, grad, 1 - beta2);
  const double t = static_cast<double>(s.step);
  const double bias_correction1 = 1 - std::pow(beta1, t);
  const double bias_correction2 = 1 - std::pow(beta2, t);
  const double step_size = lr / bias_correction1;
  const double bias_correction2_sqrt = std::pow(bias_correction2, 0.5);
  const at::Tensor denom = (s.exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(options_.eps);
  s.param.addcdiv_(s.exp_avg, denom, -step_size);
}

void Lamb::update(Slot& s, const at::Tensor& grad, double lr) {
  const double beta1 = options_.beta1, beta2 = options_.beta2;
  s.exp_avg.mul_(beta1).add_(grad, 1 - beta1);
  s.exp_avg_sq.mul_(beta2).addcmul_(grad, grad, 1 - beta2);
  const double t = static_cast<double>(s.step);
  const double bias_correction1 = 1 - std::pow(beta1, t);
  const double bias_correction2 = 1 - std::pow(beta2, t);
  at::Tensor u = (s.exp_avg / bias_correction1).div_((s.exp_avg_sq / bias_correction2).sqrt_().add_(options_.eps));
  if (s.decay && options_.weight_decay != 0) u.add_(s.param, options_.weight_decay);
  // Trust ratio on the device, without a host sync: ||p|| / ||u||, or 1 when either is 0.
  const at::Tensor p_norm = at::linalg_vector_norm(s.param, 2);
  const at::Tensor u_norm = at::linalg_vector_norm(u, 2);
  const at::Tensor ratio = at::where(p_norm.gt(0).logical_and(u_norm.gt(0)), p_norm / u_norm, at::ones_like(p_norm));
  s.param.sub_(u.mul_(ratio * lr));
}

std::unique_ptr<Optimizer> make_optimizer(const NamedTensors& params, const OptimizerOptions& options,
                                          const DecayRule& decay) {
  if (options.optimizer == OptimizerKind::kLamb) return std::make_unique<Lamb>(params, options, decay);
  return std::make_unique<AdamW>(params, options, decay);
}

}  // namespace tupe::trainer
