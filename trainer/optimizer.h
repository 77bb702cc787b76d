// Optimizers on fp32 master parameters, over named parameter lists.
//
// Both keep Adam's moments per parameter (exp_avg m, exp_avg_sq v, step count t):
//   m <- beta1 m + (1 - beta1) g,   v <- beta2 v + (1 - beta2) g^2,
//   m_hat = m / (1 - beta1^t),      v_hat = v / (1 - beta2^t).
// AdamW (Loshchilov & Hutter; torch.optim.AdamW's single-tensor path, op for op):
//   p <- p (1 - lr wd);  p <- p - lr m_hat / (sqrt(v_hat) + eps)
// LAMB (You et al. 2020, NVIDIA's BERT recipe, applied per parameter):
//   u = m_hat / (sqrt(v_hat) + eps) + wd p;  r = ||p|| / ||u|| (1 when either is 0);
//   p <- p - lr r u
// wd is 0 for parameters the decay rule exempts (biases, LayerNorm weights).
// A parameter whose grad is undefined is skipped in that step (its t does not advance),
// as in PyTorch. Gradient clipping and loss unscaling happen before step() (grad_clip.h,
// loss_scaler.h).
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "trainer/named_tensors.h"
#include "trainer/options.h"
#include "trainer/safetensors.h"

namespace tupe::trainer {

/// Whether a parameter gets weight decay, by name.
using DecayRule = std::function<bool(const std::string& name)>;

/// The default rule: no decay for biases (last name component "bias") and LayerNorm
/// parameters (a component containing "norm", case-insensitive, e.g. "attention_norm",
/// "LayerNorm"); decay for everything else (weights, embedding and position tables).
bool default_weight_decay(const std::string& name);

/// Optimizer state as named tensors for checkpoints: "<param>/exp_avg", "<param>/exp_avg_sq"
/// (dtype and shape of the parameter) and "<param>/step" (int64, shape []); metadata holds
/// "optimizer" (the kind), "format_version" and the hyperparameters (for reading only).
struct OptimizerState {
  NamedTensors tensors;
  TensorMetadata metadata;
};

/// Base of AdamW and LAMB: the parameter list, Adam moments and the state dict.
class Optimizer {
 public:
  /// `params`: fp32 (or fp64) leaf tensors with unique names, on any one device; the
  /// optimizer updates them in place. Throws tupe::Error for a duplicate name or a
  /// non-floating-point parameter.
  Optimizer(const NamedTensors& params, const OptimizerOptions& options, const DecayRule& decay);
  virtual ~Optimizer() = default;

  /// "adamw" | "lamb".
  virtual std::string kind() const = 0;

  /// One update at learning rate `lr` (from the schedule) on every parameter with a
  /// defined grad (same shape and dtype as the parameter; throws tupe::Error naming it
  /// otherwise). Runs under NoGradGuard.
  void step(double lr);

  /// Sets every defined grad to zero (in place: keeps views into gradient buckets valid).
  void zero_grad();

  /// Whether `name` gets weight decay (per the rule given at construction).
  bool decays(const std::string& name) const;

  /// State for checkpoints; the tensors share storage with the optimizer (copy them if
  /// the optimizer steps before they are written).
  OptimizerState state_dict() const;
  /// Restores state_dict() output. Strict: the kind must match and the names must be
  /// exactly this optimizer's, with equal shapes; throws ONE tupe::Error listing every
  /// mismatch (missing, unexpected, shape).
  void load_state_dict(const OptimizerState& state);

 protected:
  struct Slot {
    std::string name;
    at::Tensor param;       ///< the master parameter (updated in place)
    at::Tensor exp_avg;     ///< m, like param
    at::Tensor exp_avg_sq;  ///< v, like param
    int64_t step = 0;       ///< t: updates applied to this parameter
    bool decay = true;      ///< weight decay applies
  };
  /// Applies one update to `s` with gradient `grad`; s.step is already incremented.
  virtual void update(Slot& s, const at::Tensor& grad, double lr) = 0;

  OptimizerOptions options_;

 private:
  std::vector<Slot> slots_;
};

/// AdamW, numerically as torch.optim.AdamW(foreach=False) (see the file comment).
class AdamW final : public Optimizer {
 public:
  AdamW(const NamedTensors& params, const OptimizerOptions& options, const DecayRule& decay = default_weight_decay)
      : Optimizer(params, options, decay) {}
  std::string kind() const override { return "adamw"; }

 protected:
  void update(Slot& s, const at::Tensor& grad, double lr) override;
};

/// LAMB with per-parameter trust ratio (see the file comment).
class Lamb final : public Optimizer {
 public:
  Lamb(const NamedTensors& params, const OptimizerOptions& options, const DecayRule& decay = default_weight_decay)
      : Optimizer(params, options, decay) {}
  std::string kind() const override { return "lamb"; }

 protected:
  void update(Slot& s, const at::Tensor& grad, double lr) override;
};

/// The optimizer that options.optimizer names.
std::unique_ptr<Optimizer> make_optimizer(const NamedTensors& params, const OptimizerOptions& options,
                                          const DecayRule& decay = default_weight_decay);

}  // namespace tupe::trainer
