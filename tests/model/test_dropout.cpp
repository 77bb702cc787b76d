// model/dropout.h and the CPU training attention path (model/attention.h):
//   - the keep rate is 1 - p within 6 binomial standard deviations over 4M elements, in every
//     64K block along the index, and adjacent / cross-seed masks are uncorrelated;
//   - kept values are x * (1 / (1 - p)) exactly, dropped ones 0; the gradient uses the same
//     mask; the same at::manual_seed gives the same mask, for any thread count;
//   - eval mode and p = 0 are the identity; bf16 and double work; bad p is an error;
//   - explicit_attention (CPU training) equals PyTorch's SDPA (eval mode) in float64, in the
//     forward and in every parameter gradient, for all four variants.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <cmath>

#include "common/error.h"
#include "model/dropout.h"
#include "model/tupe_bert.h"
#include "tests/model/model_test_util.h"

namespace tupe::model {
namespace {

constexpr int64_t kN = int64_t{1} << 22;

TEST(Dropout, KeepRateIsOneMinusPOverallAndAlongTheIndex) {
  for (double p : {0.1, 0.5, 0.9}) {
    const at::Tensor mask = dropout_keep_mask(kN, p, 0x1234567890ABCDEFull + static_cast<uint64_t>(p * 100)).to(at::kDouble);
    const double rate = mask.mean().item<double>();
    const double sigma = std::sqrt(p * (1 - p) / kN);
    EXPECT_NEAR(rate, 1 - p, 6 * sigma) << "p " << p;
    const int64_t block = 1 << 16;
    const at::Tensor per_block = mask.view({kN / block, block}).mean(1);
    const double block_sigma = std::sqrt(p * (1 - p) / block);
    EXPECT_LT((per_block - (1 - p)).abs().max().item<double>(), 6 * block_sigma) << "p " << p;
    // Adjacent elements and two seeds: Pearson correlation ~ N(0, 1/n).
    const at::Tensor a = mask.narrow(0, 0, kN - 1) - (1 - p), b = mask.narrow(0, 1, kN - 1) - (1 - p);
    const double adjacent = (a * b).mean().item<double>() / (p * (1 - p));
    EXPECT_LT(std::fabs(adjacent), 6 / std::sqrt(static_cast<double>(kN))) << "p " << p;
    const at::Tensor other = dropout_keep_mask(kN, p, 0x1234567890ABCDF0ull).to(at::kDouble) - (1 - p);
    const double cross = ((mask - (1 - p)) * other).mean().item<double>() / (p * (1 - p));
    EXPECT_LT(std::fabs(cross), 6 / std::sqrt(static_cast<double>(kN))) << "p " << p;
  }
  EXPECT_EQ(dropout_keep_mask(1000, 0.0, 7).sum().item<int64_t>(), 1000);
  EXPECT_EQ(dropout_keep_mask(1000, 1.0 - 1e-12, 7).sum().item<int64_t>(), 0);
}

TEST(Dropout, KeptValuesAreScaledDroppedAreZeroAndTheGradientUsesTheSameMask) {
  at::manual_seed(11);
  const double p = 0.1;
  at::Tensor x = (at::rand({512, 1024}) + 0.5).requires_grad_(true);  // no zeros: 0 in y means dropped
  at::manual_seed(3);
  at::Tensor y = model::dropout(x, p, /*training=*/true);
  const at::Tensor kept = y.detach() != 0;
  const at::Tensor expected = x.detach() * static_cast<float>(1.0 / (1.0 - p));  // float scale, one rounding
  EXPECT_TRUE(at::equal(at::where(kept, expected, at::zeros_like(expected)), y.detach()));
  EXPECT_NEAR(kept.to(at::kDouble).mean().item<double>(), 1 - p, 6 * std::sqrt(p * (1 - p) / x.numel()));
  const at::Tensor g = at::randn_like(x);
  y.backward(g);
  const at::Tensor g_expected = g * static_cast<float>(1.0 / (1.0 - p));
  EXPECT_TRUE(at::equal(x.grad(), at::where(kept, g_expected, at::zeros_like(g))));

  // The same seed gives the same mask, whatever the thread count; another seed does not.
  at::manual_seed(3);
  const int threads = at::get_num_threads();
  at::set_num_threads(threads == 1 ? 2 : 1);
  const at::Tensor again = model::dropout(x.detach(), p, true);
  at::set_num_threads(threads);
  EXPECT_TRUE(at::equal(again, y.detach()));
  at::manual_seed(4);
  EXPECT_FALSE(at::equal(model::dropout(x.detach(), p, true), y.detach()));
}

TEST(Dropout, IdentityOutsideTrainingOtherDtypesAndBadProbability) {
  const at::Tensor x = at::randn({64, 33});
  EXPECT_TRUE(model::dropout(x, 0.3, /*training=*/false).is_same(x));
  EXPECT_TRUE(model::dropout(x, 0.0, /*training=*/true).is_same(x));
  for (auto dtype : {at::kBFloat16, at::kDouble, at::kHalf}) {
    const at::Tensor xd = (at::rand({64, 33}) + 0.5).to(dtype).t();  // non-contiguous too
    const at::Tensor y = model::dropout(xd, 0.25, true);
    EXPECT_EQ(y.scalar_type(), dtype);
    EXPECT_EQ(y.sizes(), xd.sizes());
    const at::Tensor expected = (xd.to(at::kDouble) * (1.0 / 0.75)).to(dtype);  // scaled in float, rounded once
    const at::Tensor kept = y != 0;
    EXPECT_GT(kept.sum().item<int64_t>(), 0);
    if (dtype == at::kDouble) {
      EXPECT_TRUE(at::allclose(y.masked_select(kept), expected.masked_select(kept), 0, 0));
    } else {  // float accumulation then one rounding: within half an ulp of the exact product
      const double ulp = dtype == at::kBFloat16 ? 1.0 / 128 : 1.0 / 1024;
      EXPECT_LE(((y.to(at::kDouble) - xd.to(at::kDouble) / 0.75).abs() / (xd.to(at::kDouble) / 0.75))
                    .masked_select(kept).max().item<double>(), ulp / 2 + 1e-6);
    }
  }
  EXPECT_THROW(model::dropout(x, 1.0, true), Error);
  EXPECT_THROW(model::dropout(x, -0.1, true), Error);
  EXPECT_THROW(Dropout(1.5), Error);
  Dropout module(0.5);
  module->eval();
  EXPECT_TRUE(module(x).is_same(x));
}

TEST(Attention, CpuTrainingPathEqualsSdpaForwardAndGradientsInFloat64) {
  for (auto pe : {PositionEncoding::kTupeRelative, PositionEncoding::kTupeAbsolute, PositionEncoding::kBertRelative,
                  PositionEncoding::kBertAbsolute}) {
    SCOPED_TRACE(to_string(pe));
    at::manual_seed(21);
    auto cfg = testing::small_config(pe, pe != PositionEncoding::kBertAbsolute, 16, 4);
    // BERT-A's padding mask needs no gradient: a drop probability of 1e-12 (nothing is
    // dropped among these few elements; the scale differs from 1 by 1e-12) makes its
    // training forward take the explicit path too.
    if (pe == PositionEncoding::kBertAbsolute) cfg.attention_dropout = 1e-12;
    TupeBert net(cfg);
    net->to(at::kDouble);
    testing::randomize(*net, 0.4);
    const at::Tensor ids = at::randint(cfg.vocab_size, {3, 11}, at::kLong);
    at::Tensor mask = at::ones({3, 11}, at::kLong);
    mask[2].narrow(0, 8, 3).fill_(0);
    const at::Tensor pos = at::tensor({1, 4, 9, 15, 30}, at::kLong);
    const at::Tensor w = at::randn({5, cfg.vocab_size}, at::kDouble);
    auto run = [&](bool training) {
      net->train(training);
      net->zero_grad();
      const at::Tensor out = net->mlm_logits(ids, mask, {}, pos);
      (out * w).sum().backward();
      std::vector<at::Tensor> grads{out.detach().clone()};
      for (auto& p : net->parameters()) grads.push_back(p.grad().defined() ? p.grad().clone() : at::Tensor());
      return grads;
    };
    const auto sdpa = run(false), expl = run(true);
    ASSERT_EQ(sdpa.size(), expl.size());
    for (size_t i = 0; i < sdpa.size(); ++i) {
      ASSERT_EQ(sdpa[i].defined(), expl[i].defined()) << i;
      if (!sdpa[i].defined()) continue;
      const double scale = std::max(1.0, sdpa[i].abs().max().item<double>());
      EXPECT_LT((sdpa[i] - expl[i]).abs().max().item<double>(), 1e-10 * scale) << (i == 0 ? "logits" : "grad ") << i;
    }
  }
}

}  // namespace
}  // namespace tupe::model
