#include "model/attention.h"

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <torch/nn/init.h>

#include "common/error.h"

#include "model/dropout.h"
#include "model/linear.h"
#include "model/sdpa_kernels.h"

namespace tupe::model {

at::ScalarType attention_compute_dtype(const at::Tensor& like) {
  const c10::DeviceType dev = like.device().type();
  if (at::autocast::is_autocast_available(dev) && at::autocast::is_autocast_enabled(dev) &&
      at::autocast::is_eligible(like, dev))
    return at::autocast::get_autocast_dtype(dev);
  return like.scalar_type();
}

SelfAttentionImpl::SelfAttentionImpl(const ModelOptions& c) : config(c) {
  const int64_t d = c.hidden_size;
  query = register_module("query", torch::nn::Linear(d, d));
  key = register_module("key", torch::nn::Linear(d, d));
  value = register_module("value", torch::nn::Linear(d, d));
  output = register_module("output", torch::nn::Linear(d, d));
  reset_parameters();
}

void SelfAttentionImpl::reset_parameters() {
  torch::NoGradGuard no_grad;
  for (auto& lin : {query, key, value, output}) {
    torch::nn::init::normal_(lin->weight, 0.0, config.init_std);
    torch::nn::init::zeros_(lin->bias);
  }
}

std::array<at::Tensor, 3> SelfAttentionImpl::project_qkv(const at::Tensor& x) const {
  const int64_t B = x.size(0), L = x.size(1);
  // (3d, d) and (3d): rows [0, d) = W^Q, [d, 2d) = W^K, [2d, 3d) = W^V. at::cat is a
  // "promote" op for autocast (fp32 weights stay fp32); at::linear then casts x and the
  // fused weight once. Backward of cat hands each Linear its (d, d) block of the gradient.
  const at::Tensor w = at::cat({query->weight, key->weight, value->weight});
  const at::Tensor b = at::cat({query->bias, key->bias, value->bias});
  // (B, L, 3d) viewed as (B, L, 3, H, d_h); unbind(2) gives three (B, L, H, d_h) views, each
  // transposed to (B, H, L, d_h). unbind's backward stacks the three head-major gradients
  // straight into one contiguous (B, L, 3, H, d_h) = (B, L, 3d) buffer for the linear's
  // backward GEMMs: one copy, as the per-projection reshapes made before (no extra concat).
  const std::vector<at::Tensor> qkv =
      at::linear(x, w, b).view({B, L, 3, config.num_heads, config.head_size()}).unbind(2);
  return {qkv[0].transpose(1, 2), qkv[1].transpose(1, 2), qkv[2].transpose(1, 2)};
}

AttentionInputs SelfAttentionImpl::inputs(const at::Tensor& x, const PositionInputs& pos) const {
  auto [q, k, v] = project_qkv(x);
  AttentionInputs in{q, k, v, pos};
  // SDPA wants the mask in the query's dtype. Encoder passes it already in the compute
  // dtype (cast once per forward for all layers): then this is a no-op, no graph node.
  if (pos.bias.defined()) in.pos.bias = pos.bias.to(q.scalar_type());
  in.scale = config.attention_scale();
  in.dropout = is_training() ? config.attention_dropout : 0.0;
  return in;
}

at::Tensor SelfAttentionImpl::forward(const at::Tensor& x, const PositionInputs& pos) {
  const int64_t B = x.size(0), L = x.size(1);
  const at::Tensor ctx = attend(inputs(x, pos), is_training(), avoid_cudnn_in_training);  // (B, H, L, d_h)
  return linear(output, ctx.transpose(1, 2).reshape({B, L, config.hidden_size}));
}

at::Tensor SelfAttentionImpl::logits(const at::Tensor& x, const PositionInputs& pos) {
  return attention_logits(inputs(x, pos));
}

at::Tensor SelfAttentionImpl::forward(const at::Tensor& x, const at::Tensor& bias) {
  PositionInputs pos;
  pos.bias = bias;
  return forward(x, pos);
}

at::Tensor SelfAttentionImpl::logits(const at::Tensor& x, const at::Tensor& bias) {
  PositionInputs pos;
  pos.bias = bias;
  return logits(x, pos);
}

at::Tensor apply_rotary(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  const int64_t half = x.size(-1) / 2;
  const at::Tensor x1 = x.narrow(-1, 0, half), x2 = x.narrow(-1, half, half);
  return x * cos + at::cat({-x2, x1}, -1) * sin;
}

namespace {

/// The per-layer query/key terms: BERT-A^d's (x W^Q + b^Q + pq)(x W^K + b^K + pk)^T expands into
/// its four terms; RoPE's rotation of q and k. A no-op cast when the encoder passed them in the
/// compute dtype.
void add_query_key_terms(AttentionInputs& in) {
  const PositionInputs& pos = in.pos;
  if (pos.pos_q.defined()) in.q = in.q + pos.pos_q.to(in.q.scalar_type());
  if (pos.pos_k.defined()) in.k = in.k + pos.pos_k.to(in.k.scalar_type());
  if (pos.rope_cos.defined()) {  // RoPE: no L x L tensor, the rotation is elementwise on q and k
    const at::Tensor cos = pos.rope_cos.to(in.q.scalar_type()), sin = pos.rope_sin.to(in.q.scalar_type());
    in.q = apply_rotary(in.q, cos, sin);
    in.k = apply_rotary(in.k, cos, sin);
  }
}

/// softmax(q k^T * scale + bias) v with model/dropout.h's dropout: (B, H, L, d_h), the bias add
/// and the scale in one GEMM (CPU training).
at::Tensor explicit_attention(const AttentionInputs& in) {
  const int64_t B = in.q.size(0), H = in.q.size(1), L = in.q.size(2), dh = in.q.size(3);
  const at::Tensor q3 = in.q.reshape({B * H, L, dh}), k3 = in.k.reshape({B * H, L, dh}),
                   v3 = in.v.reshape({B * H, L, dh});
  at::Tensor scores;  // (B*H, L, L) = bias + scale * q k^T in one GEMM (beta = 1, alpha = scale)
  if (in.pos.bias.defined()) {
    // (B, H, Lq, L) with Lq = L or 1: a view for TUPE's full bias; BERT-A's (B, 1, 1, L)
    // padding mask becomes (B*H, 1, L), which baddbmm broadcasts over the query rows.
    const int64_t Lq = in.pos.bias.size(-2);
    const at::Tensor mask3 = in.pos.bias.expand({B, H, Lq, L}).reshape({B * H, Lq, L});
    scores = at::baddbmm(mask3, q3, k3.transpose(1, 2), /*beta=*/1.0, /*alpha=*/in.scale);
  } else {
    scores = at::bmm(q3, k3.transpose(1, 2)).mul_(in.scale);
  }
  const at::Tensor probs = model::dropout(at::softmax(scores, -1), in.dropout, /*training=*/true);
  return at::bmm(probs, v3).view({B, H, L, dh});
}

}  // namespace

namespace {

/// attend()'s one choice of path, which attention_kernel() reports too: the explicit path for
/// CPU training with attention dropout or a bias that needs a gradient, else SDPA.
bool takes_explicit_path(bool cpu, bool training, double dropout, bool bias_needs_grad) {
  return cpu && training && (dropout > 0.0 || bias_needs_grad);
}

}  // namespace

at::Tensor attend(AttentionInputs in, bool training, bool avoid_cudnn_in_training) {
  add_query_key_terms(in);
  const double p = training ? in.dropout : 0.0;
  if (takes_explicit_path(in.q.device().is_cpu(), training, p, in.pos.bias.defined() && in.pos.bias.requires_grad()))
    return explicit_attention(in);
  // No bias (BERT-A without padding) is SDPA's nullopt: an undefined tensor would be a mask of no dtype.
  const std::optional<at::Tensor> mask = in.pos.bias.defined() ? std::optional<at::Tensor>(in.pos.bias) : std::nullopt;
  if (in.q.is_cuda() && cudnn_sdpa_avoided(in.q, in.pos.bias, avoid_cudnn_in_training)) {
    const CudnnSdpaOff no_cudnn;
    return at::scaled_dot_product_attention(in.q, in.k, in.v, mask, p, /*is_causal=*/false, in.scale);
  }
  return at::scaled_dot_product_attention(in.q, in.k, in.v, mask, p, /*is_causal=*/false, in.scale);
}

std::string attention_kernel(const ModelOptions& c, int64_t batch, int64_t length, const c10::Device& device,
                             at::ScalarType dtype, bool training, bool avoid_cudnn_in_training) {
  const bool bias_needs_grad = training && c.has_learned_logit_term();
  const double p = training ? c.attention_dropout : 0.0;
  if (takes_explicit_path(device.is_cpu(), training, p, bias_needs_grad)) return "explicit (CPU training path)";
  const auto opts = at::TensorOptions().device(device).dtype(dtype);
  const int64_t H = c.num_heads, dh = c.head_size();
  const at::AutoGradMode grad_mode(training);
  const at::Tensor q = at::zeros({batch, H, length, dh}, opts).requires_grad_(training);
  const at::Tensor k = at::zeros({batch, H, length, dh}, opts), v = at::zeros({batch, H, length, dh}, opts);
  const at::Tensor mask = c.has_positional_logit_term()
                              ? at::zeros({batch, H, length, length}, opts).requires_grad_(bias_needs_grad)
                              : at::zeros({batch, 1, 1, length}, opts);
  return training ? training_sdpa_choice(q, k, v, mask, p, c.attention_scale(), avoid_cudnn_in_training)
                  : sdpa_choice(q, k, v, mask, p, c.attention_scale());
}

at::Tensor attention_logits(AttentionInputs in) {
  add_query_key_terms(in);
  at::Tensor s = at::matmul(in.q, in.k.transpose(-2, -1)) * in.scale;
  return in.pos.bias.defined() ? s + in.pos.bias : s;
}

}  // namespace tupe::model
