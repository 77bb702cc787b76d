// Optimizers on fp32 master parameters, over named parameter lists.
//
// Both keep Adam's moments per parameter (exp_avg m, exp_avg_sq v, step count t):
//   m <- beta1 m + (1 - beta1) g,   v <- beta2 v + (1 - beta2) g^2,
//   m_hat = m / (1 - beta1^t),      v_hat = v / (1 - beta2^t).
// AdamW (Loshchilov & Hutter; numerically torch.optim.AdamW(fused=True)):
//   p <- p (1 - lr wd);  p <- p - lr m_hat / (sqrt(v_hat) + eps)
// LAMB (You et al. 2020, NVIDIA's BERT recipe, applied per parameter):
//   u = m_hat / (sqrt(v_hat) + eps) + wd p;  r = ||p|| / ||u|| (1 when either is 0);
//   p <- p - lr r u
// wd is 0 for parameters the decay rule exempts (biases, LayerNorm weights).
// A parameter whose grad is undefined is skipped in that step (its t does not advance),
// as in PyTorch. Gradient clipping and loss unscaling happen before step(), in the shared
// optimizer step (optimizer_step.h).
//
// Multi-tensor implementation: parameters are grouped by (dtype, device); a step issues a
// fixed number of ATen ops per group, not per parameter. AdamW: at::_fused_adamw_ (one
// call per decay class). LAMB: at::_fused_adamw_ computes the moments and the Adam
// direction into a scratch buffer per parameter (lr 1, weight decay 1 overwrites it), then
// _foreach_ ops add wd p, take all norms in one call and apply the per-parameter trust
// ratios. No step reads a device value on the host: t lives on the device (float32, as
// the kernel reads it: exact for counts up to 2^24 = 16.7M steps; load_state_dict refuses
// more) and a step can be cancelled on the device by found_inf.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "checkpoint/optimizer_state.h"
#include "trainer/options.h"

namespace tupe::trainer {

/// Whether a parameter gets weight decay, by name.
using DecayRule = std::function<bool(const std::string& name)>;

/// The default rule: no decay for biases (last name component "bias") and LayerNorm
/// parameters (a component containing "norm", case-insensitive, e.g. "attention_norm",
/// "LayerNorm"); decay for everything else (weights, embedding and position tables).
bool default_weight_decay(const std::string& name);


/// Base of AdamW and LAMB: the parameter list, Adam moments and the state dict.
class Optimizer {
 public:
  /// `params`: fp32 (or fp64) contiguous leaf tensors with unique names; the optimizer
  /// updates them in place. Throws tupe::Error for a duplicate name, a non-floating-point
  /// or a non-contiguous parameter.
  Optimizer(const checkpoint::NamedTensors& params, const OptimizerOptions& options, const DecayRule& decay);
  virtual ~Optimizer() = default;

  /// "adamw" | "lamb".
  virtual std::string kind() const = 0;

  /// One update at learning rate `lr` (from the schedule) on every parameter with a
  /// defined grad (same shape, dtype and device as the parameter; throws tupe::Error
  /// naming it otherwise). Same as step(lr, at::Tensor()).
  void step(double lr);

  /// As step(lr), cancelled on the device when `found_inf` is 1: then nothing changes
  /// (parameters, moments and step counts keep their bits; LAMB adds a zero update, so a
  /// parameter entry of -0.0 may read +0.0). `found_inf`: undefined (never
  /// cancel) or a float32 tensor of one element (shape [] or [1]) on the parameters'
  /// device holding 0 or 1, as at::_amp_foreach_non_finite_check_and_unscale_ writes it
  /// (other values are not checked, since that would need a host sync). Never reads a
  /// device value on the host. Runs under NoGradGuard. Throws tupe::Error for a bad lr
  /// (not finite or < 0), a bad grad, or a found_inf of another dtype, size or device.
  void step(double lr, const at::Tensor& found_inf);

  /// Sets every defined grad to zero (in place: keeps views into gradient buckets valid).
  void zero_grad();

  /// Whether `name` gets weight decay (per the rule given at construction).
  bool decays(const std::string& name) const;

  /// State for checkpoints; exp_avg/exp_avg_sq share storage with the optimizer (copy them
  /// if the optimizer steps before they are written); "<param>/step" is a new int64 [] CPU
  /// tensor (reading t from the device: a host sync).
  checkpoint::OptimizerState state_dict() const;
  /// Restores state_dict() output. Strict: the kind must match and the names must be
  /// exactly this optimizer's, with equal shapes; throws ONE tupe::Error listing every
  /// mismatch (missing, unexpected, shape); a step must be in [0, 2^24] (exact in float32).
  void load_state_dict(const checkpoint::OptimizerState& state);

 protected:
  struct Slot {
    std::string name;
    at::Tensor param;       ///< the master parameter (updated in place)
    at::Tensor exp_avg;     ///< m, like param (contiguous)
    at::Tensor exp_avg_sq;  ///< v, like param (contiguous)
    at::Tensor step;        ///< t: updates applied so far, float32 [] on the param's device
    bool decay = true;      ///< weight decay applies
  };
  /// Parameters of one (dtype, device), in construction order.
  struct Group {
    at::ScalarType dtype;
    at::Device device;
    std::vector<size_t> slots;  ///< indices into slots()
  };
  /// The members of one group that have a grad in this step, as parallel lists.
  struct StepMembers {
    std::vector<size_t> slots;  ///< indices into slots(), ascending
    std::vector<at::Tensor> params, grads, exp_avgs, exp_avg_sqs, steps;
  };
  /// Updates one group: `batch` is non-empty, `found_inf` is undefined or a float32 []
  /// tensor on the group's device. Advances t of the batch (unless cancelled).
  virtual void update(size_t group, const StepMembers& batch, double lr, const at::Tensor& found_inf) = 0;

  const std::vector<Slot>& slots() const { return slots_; }
  const std::vector<Group>& groups() const { return groups_; }

  OptimizerOptions options_;

 private:
  std::vector<Slot> slots_;
  std::vector<Group> groups_;
};

/// AdamW, numerically as torch.optim.AdamW(fused=True) (see the file comment). Per group
/// and step: 2 ops on the step counts (+1, and -found_inf when given) and one
/// at::_fused_adamw_ per decay class present.
class AdamW final : public Optimizer {
 public:
  AdamW(const checkpoint::NamedTensors& params, const OptimizerOptions& options, const DecayRule& decay = default_weight_decay)
      : Optimizer(params, options, decay) {}
  std::string kind() const override { return "adamw"; }

 protected:
  void update(size_t group, const StepMembers& batch, double lr, const at::Tensor& found_inf) override;
};

/// LAMB with per-parameter trust ratio (see the file comment). Holds one scratch tensor
/// per parameter (the update direction; memory: one more copy of the parameters).
class Lamb final : public Optimizer {
 public:
  Lamb(const checkpoint::NamedTensors& params, const OptimizerOptions& options, const DecayRule& decay = default_weight_decay);
  std::string kind() const override { return "lamb"; }

 protected:
  void update(size_t group, const StepMembers& batch, double lr, const at::Tensor& found_inf) override;

 private:
  /// Device buffers for the trust ratios of one set of batch members, with the views the
  /// ops write through (built once per member set, not per step).
  struct RatioBuffers {
    std::vector<size_t> slots;      ///< the members they were built for
    at::Tensor norms;               ///< [3n]: ||p_i||, ||u_i||, keep (1 - found_inf)
    at::Tensor norms_by_row;        ///< [3, n] view of norms
    at::Tensor p_norms, u_norms;    ///< [n] views of rows 0 and 1
    at::Tensor keep_row;            ///< [n] view of row 2
    at::Tensor ratios;              ///< [n]: lr-free coefficient per parameter
    std::vector<at::Tensor> ratio;  ///< [] views of ratios
    at::Tensor one;                 ///< [] 1 (keep when there is no found_inf)
  };
  RatioBuffers make_buffers(const Group& g, const std::vector<size_t>& members) const;
  /// The buffers for `members` of group `group`: the full group's (built at
  /// construction) or the last other member set's (rebuilt when it changes).
  const RatioBuffers& buffers_for(size_t group, const std::vector<size_t>& members);

  std::vector<at::Tensor> direction_;       ///< per slot: -u (scratch), like the param
  std::vector<RatioBuffers> full_, partial_;  ///< per group
};

/// The optimizer that options.optimizer names.
std::unique_ptr<Optimizer> make_optimizer(const checkpoint::NamedTensors& params, const OptimizerOptions& options,
                                          const DecayRule& decay = default_weight_decay);

}  // namespace tupe::trainer
