// The SDPA switches tupe sets (model/sdpa_kernels.h), on the CPU: SdpaKernelPin allows exactly
// one kernel and turns the flash backend's FA3 / FA4 kernels off where this torch has those
// switches, restoring every flag at scope exit; the cuDNN rule of a training forward
// (cudnn_sdpa_avoided) in each case; and the kernel a CPU call is offered under a pin.
#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <gtest/gtest.h>
#include <torch/version.h>

#include <array>
#include <cstdio>
#include <string>

#include "model/attention.h"
#include "model/sdpa_kernels.h"

namespace {

using tupe::model::SdpaKernel;
using tupe::model::SdpaKernelPin;

/// flash, efficient, cuDNN, math, FA3, FA4 as they are now.
std::array<bool, 6> flags() {
  const at::Context& c = at::globalContext();
  return {c.userEnabledFlashSDP(),         c.userEnabledMemEfficientSDP(), c.userEnabledCuDNNSDP(),
          c.userEnabledMathSDP(),          tupe::model::sdpa_fa3_enabled(), tupe::model::sdpa_fa4_enabled()};
}

/// Sets the six flags (FA3 / FA4 where this torch has them).
void set_flags(const std::array<bool, 6>& f) {
  at::Context& c = at::globalContext();
  c.setSDPUseFlash(f[0]);
  c.setSDPUseMemEfficient(f[1]);
  c.setSDPUseCuDNN(f[2]);
  c.setSDPUseMath(f[3]);
  tupe::model::set_sdpa_fa3(f[4]);
  tupe::model::set_sdpa_fa4(f[5]);
}

TEST(SdpaKernelPin, AllowsOneKernelTurnsFa3Fa4OffAndRestoresEveryFlag) {
  const std::array<bool, 6> saved = flags();
  // Every switch on before the pin, FA3 / FA4 included where they exist.
  set_flags({true, true, true, true, true, true});
  const bool fa3 = tupe::model::sdpa_has_fa3_switch(), fa4 = tupe::model::sdpa_has_fa4_switch();
  EXPECT_EQ(tupe::model::sdpa_fa3_enabled(), fa3);
  EXPECT_EQ(tupe::model::sdpa_fa4_enabled(), fa4);
  std::printf("[ measured ] this torch (%s) has the FA3 switch: %s, the FA4 switch: %s\n", TORCH_VERSION,
              fa3 ? "yes" : "no", fa4 ? "yes" : "no");
  const std::array<SdpaKernel, 4> kernels = {SdpaKernel::kFlash, SdpaKernel::kEfficient, SdpaKernel::kCudnn,
                                             SdpaKernel::kMath};
  for (size_t i = 0; i < kernels.size(); ++i) {
    {
      const SdpaKernelPin pin(kernels[i]);
      const std::array<bool, 6> in = flags();
      for (size_t j = 0; j < 4; ++j) EXPECT_EQ(in[j], i == j) << to_string(kernels[i]) << " pinned, flag " << j;
      EXPECT_FALSE(in[4]) << to_string(kernels[i]) << " pinned: FA3 must be off";
      EXPECT_FALSE(in[5]) << to_string(kernels[i]) << " pinned: FA4 must be off";
    }
    const std::array<bool, 6> after = flags();
    EXPECT_EQ(after, (std::array<bool, 6>{true, true, true, true, fa3, fa4})) << "after the " << to_string(kernels[i])
                                                                              << " pin";
  }
  // Nested pins restore in order, from a state with some flags off.
  set_flags({false, true, false, true, true, false});
  {
    const SdpaKernelPin outer(SdpaKernel::kCudnn);
    {
      const SdpaKernelPin inner(SdpaKernel::kFlash);
      EXPECT_TRUE(at::globalContext().userEnabledFlashSDP());
    }
    EXPECT_EQ(flags(), (std::array<bool, 6>{false, false, true, false, false, false}));
  }
  EXPECT_EQ(flags(), (std::array<bool, 6>{false, true, false, true, fa3, false}));
  set_flags(saved);
}

TEST(SdpaKernelPin, SetFa3Fa4ReportWhetherTheSwitchExists) {
  const bool fa3 = tupe::model::sdpa_fa3_enabled(), fa4 = tupe::model::sdpa_fa4_enabled();
  EXPECT_EQ(tupe::model::set_sdpa_fa3(true), tupe::model::sdpa_has_fa3_switch());
  EXPECT_EQ(tupe::model::set_sdpa_fa4(true), tupe::model::sdpa_has_fa4_switch());
  EXPECT_EQ(tupe::model::sdpa_fa3_enabled(), tupe::model::sdpa_has_fa3_switch());
  EXPECT_EQ(tupe::model::sdpa_fa4_enabled(), tupe::model::sdpa_has_fa4_switch());
  tupe::model::set_sdpa_fa3(fa3);
  tupe::model::set_sdpa_fa4(fa4);
}

TEST(CudnnSdpaRule, ABiasThatNeedsAGradientNeverGetsCudnn) {
  const at::Tensor q = at::randn({2, 2, 8, 4}), q_grad = q.clone().requires_grad_(true);
  const at::Tensor bias = at::randn({2, 2, 8, 8}), bias_grad = bias.clone().requires_grad_(true);
  const at::Tensor none;
  using tupe::model::cudnn_sdpa_avoided;
  for (const bool avoid : {false, true}) {
    // TUPE's bias needs a gradient: cuDNN is off whatever avoid_cudnn_in_training says.
    EXPECT_TRUE(cudnn_sdpa_avoided(q_grad, bias_grad, avoid)) << "avoid " << avoid;
    EXPECT_TRUE(cudnn_sdpa_avoided(q, bias_grad, avoid)) << "avoid " << avoid;
    // No mask: nothing to avoid.
    EXPECT_FALSE(cudnn_sdpa_avoided(q_grad, none, avoid)) << "avoid " << avoid;
    // A mask without gradient and no gradient for q either (a frozen encoder): torch's choice.
    EXPECT_FALSE(cudnn_sdpa_avoided(q, bias, avoid)) << "avoid " << avoid;
  }
  // BERT-A's padding mask (no gradient) in training: off only with avoid_cudnn_in_training.
  EXPECT_TRUE(cudnn_sdpa_avoided(q_grad, bias, true));
  EXPECT_FALSE(cudnn_sdpa_avoided(q_grad, bias, false));
  // Inference (no grad mode): torch's own choice, whatever needs a gradient.
  const at::NoGradGuard no_grad;
  EXPECT_FALSE(cudnn_sdpa_avoided(q_grad, bias_grad, true));
  EXPECT_FALSE(cudnn_sdpa_avoided(q_grad, bias_grad, false));
}

TEST(CudnnSdpaRule, TrainingChoiceOnTheCpuFollowsThePin) {
  const at::Tensor q = at::randn({2, 2, 8, 4}).requires_grad_(true), k = at::randn({2, 2, 8, 4}),
                   v = at::randn({2, 2, 8, 4});
  const at::Tensor bias = at::randn({2, 2, 8, 8}).requires_grad_(true);
  {
    const SdpaKernelPin math(SdpaKernel::kMath);
    EXPECT_EQ(tupe::model::training_sdpa_choice(q, k, v, bias, 0.0, 0.5, false), "math");
  }
  {
    // cuDNN alone allowed, and the bias needs a gradient: the rule switches cuDNN off too, so
    // no kernel is left (on the CPU none would serve anyway).
    const SdpaKernelPin cudnn(SdpaKernel::kCudnn);
    EXPECT_EQ(tupe::model::training_sdpa_choice(q, k, v, bias, 0.0, 0.5, false), "none");
    EXPECT_TRUE(at::globalContext().userEnabledCuDNNSDP()) << "the rule must restore the cuDNN flag";
  }
}

}  // namespace

TEST(AttentionKernel, TheKernelAttendRunsForEachEncodingOnTheCpu) {
  using tupe::model::attention_kernel;
  const c10::Device cpu(c10::kCPU);
  tupe::model::ModelOptions bert_a;  // the defaults, with the fields that matter here set
  bert_a.num_heads = 2;
  bert_a.hidden_size = 16;
  bert_a.position_encoding = tupe::model::PositionEncoding::kBertAbsolute;
  bert_a.attention_dropout = 0.0;
  tupe::model::ModelOptions tupe_r = bert_a;
  tupe_r.position_encoding = tupe::model::PositionEncoding::kTupeRelative;
  // CPU training with a bias that needs a gradient, or with attention dropout: the explicit path.
  EXPECT_EQ(attention_kernel(tupe_r, 2, 8, cpu, at::kFloat, true, true), "explicit (CPU training path)");
  tupe::model::ModelOptions dropped = bert_a;
  dropped.attention_dropout = 0.1;
  EXPECT_EQ(attention_kernel(dropped, 2, 8, cpu, at::kFloat, true, true), "explicit (CPU training path)");
  // Otherwise SDPA, whose own choice for the same arguments is the answer.
  const at::Tensor q = at::zeros({2, 2, 8, 8}), k = at::zeros({2, 2, 8, 8}), v = at::zeros({2, 2, 8, 8});
  const at::Tensor pad = at::zeros({2, 1, 1, 8}), bias = at::zeros({2, 2, 8, 8});
  EXPECT_EQ(attention_kernel(bert_a, 2, 8, cpu, at::kFloat, false, true),
            tupe::model::sdpa_choice(q, k, v, pad, 0.0, bert_a.attention_scale()));
  EXPECT_EQ(attention_kernel(tupe_r, 2, 8, cpu, at::kFloat, false, true),
            tupe::model::sdpa_choice(q, k, v, bias, 0.0, tupe_r.attention_scale()));
  {
    const SdpaKernelPin math(SdpaKernel::kMath);  // and it follows the flags
    EXPECT_EQ(attention_kernel(tupe_r, 2, 8, cpu, at::kFloat, false, true), "math");
    EXPECT_EQ(attention_kernel(bert_a, 2, 8, cpu, at::kFloat, true, true), "math");
  }
}
