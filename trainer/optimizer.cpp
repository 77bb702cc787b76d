#include "trainer/optimizer.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <optional>
#include <set>
#include <utility>

#include "common/error.h"

namespace tupe::trainer {

namespace {
constexpr char kStateFormatVersion[] = "1";
/// Step counts live on the device as float32 (what at::_fused_adamw_ reads): whole numbers
/// are exact up to 2^24.
constexpr int64_t kMaxStep = int64_t{1} << 24;
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

Optimizer::Optimizer(const checkpoint::NamedTensors& params, const OptimizerOptions& options, const DecayRule& decay)
    : options_(options) {
  options_.validate();
  std::set<std::string> names;
  for (const auto& [name, p] : params) {
    TUPE_CHECK(names.insert(name).second, "optimizer: duplicate parameter name '" << name << "'");
    TUPE_CHECK(p.defined() && (p.scalar_type() == at::kFloat || p.scalar_type() == at::kDouble),
               "optimizer: parameter '" << name << "' must be a float32 (master) or float64 tensor, got "
                                        << (p.defined() ? c10::toString(p.scalar_type()) : "undefined"));
    TUPE_CHECK(p.layout() == at::kStrided && p.is_contiguous(),
               "optimizer: parameter '" << name << "' must be a contiguous dense tensor (the fused kernels "
                                        << "update it as one flat array)");
    Slot s;
    s.name = name;
    s.param = p;
    s.exp_avg = at::zeros_like(p, at::MemoryFormat::Contiguous);
    s.exp_avg_sq = at::zeros_like(p, at::MemoryFormat::Contiguous);
    s.step = at::zeros({}, at::TensorOptions().dtype(at::kFloat).device(p.device()));
    s.decay = decay ? decay(name) : true;
    auto g = std::find_if(groups_.begin(), groups_.end(),
                          [&](const Group& x) { return x.dtype == p.scalar_type() && x.device == p.device(); });
    if (g == groups_.end()) g = groups_.insert(groups_.end(), Group{p.scalar_type(), p.device(), {}});
    g->slots.push_back(slots_.size());
    slots_.push_back(std::move(s));
  }
}

void Optimizer::step(double lr) { step(lr, at::Tensor()); }

void Optimizer::step(double lr, const at::Tensor& found_inf) {
  TUPE_CHECK(std::isfinite(lr) && lr >= 0, "optimizer: learning rate must be finite and >= 0, got " << lr);
  at::Tensor inf;
  if (found_inf.defined()) {
    TUPE_CHECK(found_inf.scalar_type() == at::kFloat && found_inf.numel() == 1 && found_inf.dim() <= 1,
               "optimizer: found_inf must be a float32 tensor of one element (shape [] or [1]), got "
                   << c10::toString(found_inf.scalar_type()) << checkpoint::shape_text(found_inf.sizes()));
    inf = found_inf.dim() == 0 ? found_inf : found_inf.squeeze(0);
  }
  c10::NoGradGuard no_grad;
  // Check every grad before the first update, so that a bad one changes nothing.
  std::vector<StepMembers> batches(groups_.size());
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    for (size_t i : groups_[gi].slots) {
      const Slot& s = slots_[i];
      const at::Tensor& grad = s.param.grad();
      if (!grad.defined()) continue;
      TUPE_CHECK(grad.layout() == at::kStrided && grad.sizes() == s.param.sizes() &&
                     grad.scalar_type() == s.param.scalar_type() && grad.device() == s.param.device(),
                 "optimizer: grad of '" << s.name << "' is " << c10::toString(grad.scalar_type())
                                        << checkpoint::shape_text(grad.sizes()) << " on " << grad.device() << ", parameter is "
                                        << c10::toString(s.param.scalar_type()) << checkpoint::shape_text(s.param.sizes())
                                        << " on " << s.param.device() << " (unscale into fp32 master grads first)");
      StepMembers& b = batches[gi];
      b.slots.push_back(i);
      b.params.push_back(s.param);
      b.grads.push_back(grad.is_contiguous() ? grad : grad.contiguous());
      b.exp_avgs.push_back(s.exp_avg);
      b.exp_avg_sqs.push_back(s.exp_avg_sq);
      b.steps.push_back(s.step);
    }
    TUPE_CHECK(!inf.defined() || batches[gi].slots.empty() || inf.device() == groups_[gi].device,
               "optimizer: found_inf is on " << inf.device() << ", parameters are on " << groups_[gi].device);
  }
  for (size_t gi = 0; gi < groups_.size(); ++gi)
    if (!batches[gi].slots.empty()) update(gi, batches[gi], lr, inf);
}

void Optimizer::zero_grad() {
  c10::NoGradGuard no_grad;
  for (const Group& g : groups_) {
    std::vector<at::Tensor> grads;  // one _foreach_zero_ for the grads that match the group
    for (size_t i : g.slots) {
      at::Tensor grad = slots_[i].param.grad();
      if (!grad.defined()) continue;
      if (grad.layout() == at::kStrided && grad.scalar_type() == g.dtype && grad.device() == g.device)
        grads.push_back(grad);
      else
        grad.zero_();  // a grad step() would refuse: zeroed on its own
    }
    if (!grads.empty()) at::_foreach_zero_(grads);
  }
}

bool Optimizer::decays(const std::string& name) const {
  for (const Slot& s : slots_)
    if (s.name == name) return s.decay;
  TUPE_FAIL("optimizer: no parameter named '" << name << "'");
}

checkpoint::OptimizerState Optimizer::state_dict() const {
  // Step counts to the host, one copy per group. t is a whole number of at most 2^24 in
  // float32 (load_state_dict and step keep it so): exact in int64.
  std::vector<int64_t> steps(slots_.size());
  for (const Group& g : groups_) {
    std::vector<at::Tensor> on_device;
    for (size_t i : g.slots) on_device.push_back(slots_[i].step);
    const at::Tensor host = at::stack(on_device).to(at::kCPU).to(at::kLong);
    for (size_t k = 0; k < g.slots.size(); ++k) steps[g.slots[k]] = host.data_ptr<int64_t>()[k];
  }
  checkpoint::OptimizerState out;
  for (size_t i = 0; i < slots_.size(); ++i) {
    const Slot& s = slots_[i];
    out.tensors.emplace_back(s.name + "/exp_avg", s.exp_avg);
    out.tensors.emplace_back(s.name + "/exp_avg_sq", s.exp_avg_sq);
    out.tensors.emplace_back(s.name + "/step", at::scalar_tensor(steps[i], at::kLong));
  }
  out.metadata = {{"optimizer", kind()},
                  {"format_version", kStateFormatVersion},
                  {"beta1", format_double(options_.beta1)},
                  {"beta2", format_double(options_.beta2)},
                  {"eps", format_double(options_.eps)},
                  {"weight_decay", format_double(options_.weight_decay)}};
  return out;
}

void Optimizer::load_state_dict(const checkpoint::OptimizerState& state) {
  auto kind_it = state.metadata.find("optimizer");
  TUPE_CHECK(kind_it != state.metadata.end(), "optimizer state: metadata has no 'optimizer' kind");
  TUPE_CHECK(kind_it->second == kind(),
             "optimizer state: saved by '" << kind_it->second << "', cannot load into '" << kind() << "'");
  auto ver_it = state.metadata.find("format_version");
  TUPE_CHECK(ver_it != state.metadata.end() && ver_it->second == kStateFormatVersion,
             "optimizer state: format_version '" << (ver_it == state.metadata.end() ? "(absent)" : ver_it->second)
                                                 << "', expected '" << kStateFormatVersion << "'");
  // Load into fresh tensors first, so that a failing load leaves this optimizer unchanged.
  checkpoint::NamedTensors targets;
  std::vector<at::Tensor> steps;
  for (const Slot& s : slots_) {
    targets.emplace_back(s.name + "/exp_avg", at::empty_like(s.exp_avg));
    targets.emplace_back(s.name + "/exp_avg_sq", at::empty_like(s.exp_avg_sq));
    steps.push_back(at::zeros({}, at::kLong));
    targets.emplace_back(s.name + "/step", steps.back());
  }
  checkpoint::copy_named_tensors(targets, state.tensors, "optimizer state");
  std::vector<at::Tensor> device_steps;
  for (size_t i = 0; i < slots_.size(); ++i) {
    const int64_t t = steps[i].item<int64_t>();
    TUPE_CHECK(t >= 0 && t <= kMaxStep, "optimizer state: '" << slots_[i].name << "/step' is " << t
                                                             << ", outside [0, " << kMaxStep << "]");
    device_steps.push_back(at::scalar_tensor(static_cast<double>(t),
                                             at::TensorOptions().dtype(at::kFloat).device(slots_[i].param.device())));
  }
  for (size_t i = 0; i < slots_.size(); ++i) {
    slots_[i].exp_avg = targets[3 * i].second;
    slots_[i].exp_avg_sq = targets[3 * i + 1].second;
    slots_[i].step = device_steps[i];
  }
}

void AdamW::update(size_t /*group*/, const StepMembers& b, double lr, const at::Tensor& found_inf) {
  // One fused call per decay class (weight_decay is a scalar argument of the kernel).
  struct Lists {
    std::vector<at::Tensor> params, grads, exp_avgs, exp_avg_sqs, steps;
  } decayed, plain;
  const double wd = options_.weight_decay;
  for (size_t k = 0; k < b.slots.size(); ++k) {
    Lists& l = wd != 0 && slots()[b.slots[k]].decay ? decayed : plain;
    l.params.push_back(b.params[k]);
    l.grads.push_back(b.grads[k]);
    l.exp_avgs.push_back(b.exp_avgs[k]);
    l.exp_avg_sqs.push_back(b.exp_avg_sqs[k]);
    l.steps.push_back(b.steps[k]);
  }
  const std::optional<at::Tensor> inf = found_inf.defined() ? std::optional<at::Tensor>(found_inf) : std::nullopt;
  // As torch.optim.AdamW(fused=True): t + 1, the kernel (a no-op when found_inf is 1,
  // decided on the device), then t - found_inf.
  const auto fused = [&](const Lists& l, double decay) {
    if (l.params.empty()) return;
    at::_fused_adamw_(l.params, l.grads, l.exp_avgs, l.exp_avg_sqs, at::TensorList(), l.steps, lr, options_.beta1,
                      options_.beta2, decay, options_.eps, /*amsgrad=*/false, /*maximize=*/false,
                      std::nullopt /* no unscaling in the kernel: optimizer_step.h unscales */, inf);
  };
  at::_foreach_add_(b.steps, 1);
  fused(decayed, wd);
  fused(plain, 0.0);
  if (found_inf.defined()) at::_foreach_sub_(b.steps, std::vector<at::Tensor>(b.steps.size(), found_inf));
}

Lamb::Lamb(const checkpoint::NamedTensors& params, const OptimizerOptions& options, const DecayRule& decay)
    : Optimizer(params, options, decay) {
  for (const Slot& s : slots()) direction_.push_back(at::zeros_like(s.param, at::MemoryFormat::Contiguous));
  for (const Group& g : groups()) {
    full_.push_back(make_buffers(g, g.slots));
    partial_.emplace_back();
  }
}

Lamb::RatioBuffers Lamb::make_buffers(const Group& g, const std::vector<size_t>& members) const {
  const auto n = static_cast<int64_t>(members.size());
  const auto opts = at::TensorOptions().dtype(g.dtype).device(g.device);
  RatioBuffers r;
  r.slots = members;
  r.norms = at::empty({3 * n}, opts);
  r.norms_by_row = r.norms.view({3, n});
  r.p_norms = r.norms.narrow(0, 0, n);
  r.u_norms = r.norms.narrow(0, n, n);
  r.keep_row = r.norms.narrow(0, 2 * n, n);
  r.ratios = at::empty({n}, opts);
  for (int64_t i = 0; i < n; ++i) r.ratio.push_back(r.ratios.select(0, i));
  r.one = at::ones({}, opts);
  return r;
}

const Lamb::RatioBuffers& Lamb::buffers_for(size_t group, const std::vector<size_t>& members) {
  if (full_[group].slots == members) return full_[group];
  if (partial_[group].slots != members) partial_[group] = make_buffers(groups()[group], members);
  return partial_[group];
}

void Lamb::update(size_t group, const StepMembers& b, double lr, const at::Tensor& found_inf) {
  const RatioBuffers& buf = buffers_for(group, b.slots);
  const size_t n = b.slots.size();
  const double wd = options_.weight_decay;
  std::vector<at::Tensor> dirs, decay_params, decay_dirs;
  for (size_t k = 0; k < n; ++k) {
    dirs.push_back(direction_[b.slots[k]]);
    if (wd != 0 && slots()[b.slots[k]].decay) {
      decay_params.push_back(b.params[k]);
      decay_dirs.push_back(dirs.back());
    }
  }
  // keep = 1 - found_inf: 1 takes the step, 0 cancels it. t advances by keep.
  at::Tensor keep = buf.one;
  if (found_inf.defined()) {
    keep = at::rsub(found_inf, 1);
    at::_foreach_add_(b.steps, keep);
  } else {
    at::_foreach_add_(b.steps, 1);
  }
  // m, v and d = -m_hat / (sqrt(v_hat) + eps): AdamW's kernel on the scratch d with lr 1
  // and weight decay 1 computes d (1 - 1) - m_hat / (sqrt(v_hat) + eps) (d is finite), and
  // does nothing at all when found_inf is 1.
  const std::optional<at::Tensor> inf = found_inf.defined() ? std::optional<at::Tensor>(found_inf) : std::nullopt;
  at::_fused_adamw_(dirs, b.grads, b.exp_avgs, b.exp_avg_sqs, at::TensorList(), b.steps, /*lr=*/1.0, options_.beta1,
                    options_.beta2, /*weight_decay=*/1.0, options_.eps, /*amsgrad=*/false,
                    /*maximize=*/false, std::nullopt /* no unscaling in the kernel: optimizer_step.h unscales */, inf);
  if (!decay_params.empty()) at::_foreach_add_(decay_dirs, decay_params, -wd);  // d = -u
  // All norms in one call, stacked with keep into [3, n]: ||p_i||, ||u_i||, keep.
  std::vector<at::Tensor> both = b.params;
  both.insert(both.end(), dirs.begin(), dirs.end());
  std::vector<at::Tensor> rows = at::_foreach_norm(both, 2);
  rows.insert(rows.end(), n, keep);
  at::Tensor norms = buf.norms, ratios = buf.ratios;  // handles: the out= ops write the buffers
  at::stack_out(norms, rows);
  // r_i = ||p_i|| / ||u_i|| where both norms and keep are non-zero, else keep (1 when
  // either norm is 0; 0 when the step is cancelled).
  at::where_out(ratios, at::all(buf.norms_by_row, 0), at::div(buf.p_norms, buf.u_norms), buf.keep_row);
  // p <- p + lr r_i d_i = p - lr r_i u_i.
  at::_foreach_addcmul_(b.params, dirs, buf.ratio, lr);
}

std::unique_ptr<Optimizer> make_optimizer(const checkpoint::NamedTensors& params, const OptimizerOptions& options,
                                          const DecayRule& decay) {
  if (options.optimizer == OptimizerKind::kLamb) return std::make_unique<Lamb>(params, options, decay);
  return std::make_unique<AdamW>(params, options, decay);
}

}  // namespace tupe::trainer
