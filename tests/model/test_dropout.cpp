// model/dropout.h and the CPU training attention path (model/attention.h):
//   - the keep rate is 1 - p within 6 binomial standard deviations over 4M elements, in every
//     64K block along the index, and adjacent / cross-seed masks are uncorrelated;
//   - kept values are x * (1 / (1 - p)) exactly, dropped ones 0; the gradient uses the same
//     mask; the same at::manual_seed gives the same mask, for any thread count;
//   - eval mode and p = 0 are the identity; bf16 and double work; bad p is an error;
//   - explicit_attention (CPU training) equals PyTorch's SDPA (eval mode) in float64, in the
//     forward and in every parameter gradient, for all four variants;
//   - under DropoutSampleKeys, slice b of call c is dropout_keep_mask(numel / B, p,
//     hash_words({key, c, g_b})); so a training forward of TUPE-R / BERT-A gives each sample
//     the same output whatever micro-batch it is in and in which row, and its gradient too.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <cmath>

#include "common/error.h"
#include "common/mix64.h"
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

TEST(SampleKeyedDropout, EachSliceIsItsOwnSeedsMaskAndCallsDiffer) {
  const double p = 0.25;
  const uint64_t key = 0xFEEDFACE12345678ull;
  const std::vector<int64_t> ids{7, 1000003, 42};
  const int64_t per_row = 5 * 300;  // e.g. (L, d) = (5, 300) per sample
  at::Tensor x = (at::rand({3, 5, 300}) + 0.5).requires_grad_(true);
  at::Tensor y0, y1;
  {
    DropoutSampleKeys keys(key, ids);
    y0 = model::dropout(x, p, true);
    y1 = model::dropout(x, p, true);  // call 1: other masks
    EXPECT_THROW(model::dropout(at::ones({7}), p, true), Error);  // 7 elements are not 3 equal slices
  }
  EXPECT_EQ(DropoutSampleKeys::current(), nullptr);
  for (int c = 0; c < 2; ++c) {
    const at::Tensor y = (c == 0 ? y0 : y1).detach().reshape({3, per_row});
    for (int64_t b = 0; b < 3; ++b) {
      const uint64_t seed = hash_words({key, static_cast<uint64_t>(c), static_cast<uint64_t>(ids[b])});
      const at::Tensor want = dropout_keep_mask(per_row, p, seed).to(at::kBool);
      EXPECT_TRUE(at::equal(y[b] != 0, want)) << "call " << c << ", row " << b;
    }
  }
  EXPECT_FALSE(at::equal(y0, y1));
  // The gradient takes the forward's mask.
  y0.sum().backward();
  EXPECT_TRUE(at::equal(x.grad() != 0, y0.detach() != 0));
  // Rows, not positions: the same samples in another order give the same slices, reordered.
  DropoutSampleKeys reordered(key, {ids[2], ids[0], ids[1]});
  const at::Tensor z = model::dropout(x.detach().index_select(0, at::tensor({2, 0, 1})), p, true);
  EXPECT_TRUE(at::equal(z, y0.detach().index_select(0, at::tensor({2, 0, 1}))));
  EXPECT_THROW(DropoutSampleKeys(key, {}), Error);
}

TEST(SampleKeyedDropout, ASamplesTrainingForwardAndGradientDoNotDependOnItsMicroBatch) {
  for (auto pe : {PositionEncoding::kTupeRelative, PositionEncoding::kBertAbsolute}) {
    SCOPED_TRACE(to_string(pe));
    at::manual_seed(5);
    auto cfg = testing::small_config(pe, pe == PositionEncoding::kTupeRelative, 16, 4);
    cfg.hidden_dropout = cfg.attention_dropout = 0.3;
    TupeBert net(cfg);
    net->to(at::kDouble);
    testing::randomize(*net, 0.4);
    net->train(true);
    const int64_t L = 9;
    const at::Tensor ids = at::randint(cfg.vocab_size, {4, L}, at::kLong), mask = at::ones({4, L}, at::kLong);
    const std::vector<int64_t> samples{11, 3, 250, 8};
    const uint64_t key = 99;
    // Logits at every position of each row, and every parameter's gradient of their sum.
    auto run = [&](const std::vector<int64_t>& rows) {
      const at::Tensor r = at::tensor(rows, at::kLong);
      std::vector<int64_t> g;
      for (int64_t i : rows) g.push_back(samples[static_cast<size_t>(i)]);
      const DropoutSampleKeys keys(key, g);
      net->zero_grad();
      const auto n = static_cast<int64_t>(rows.size());
      const at::Tensor out =
          net->mlm_logits(ids.index_select(0, r), mask.index_select(0, r), {}, at::arange(n * L, at::kLong));
      out.sum().backward();
      std::vector<at::Tensor> grads;
      for (auto& q : net->parameters()) grads.push_back(q.grad().defined() ? q.grad().clone() : at::zeros_like(q));
      return std::make_pair(out.detach().view({n, L, -1}), grads);
    };
    const auto [all, g_all] = run({0, 1, 2, 3});
    const auto [first, g_first] = run({0, 1});
    const auto [last, g_last] = run({3, 2});  // other rows, other micro-batch size
    EXPECT_LT((all.narrow(0, 0, 2) - first).abs().max().item<double>(), 1e-12);
    EXPECT_LT((all[3] - last[0]).abs().max().item<double>(), 1e-12);
    EXPECT_LT((all[2] - last[1]).abs().max().item<double>(), 1e-12);
    // The loss is a sum over samples: the two micro-batches' gradients add up to the batch's.
    for (size_t i = 0; i < g_all.size(); ++i) {
      const double scale = std::max(1.0, g_all[i].abs().max().item<double>());
      EXPECT_LT((g_all[i] - g_first[i] - g_last[i]).abs().max().item<double>(), 1e-10 * scale) << "parameter " << i;
    }
    // Another step key draws other masks (so the check above is not of a dropout that is off).
    const DropoutSampleKeys other(key + 1, samples);
    const at::Tensor again = net->mlm_logits(ids, mask, {}, at::arange(4 * L, at::kLong)).detach().view({4, L, -1});
    EXPECT_GT((again - all).abs().max().item<double>(), 1e-3);
  }
}

TEST(Attention, CpuTrainingPathEqualsSdpaForwardAndGradientsInFloat64) {
  for (auto pe : {PositionEncoding::kTupeRelative, PositionEncoding::kTupeAbsolute, PositionEncoding::kBertRelative,
                  PositionEncoding::kBertAbsolute, PositionEncoding::kBertAbsoluteUntied}) {
    SCOPED_TRACE(to_string(pe));
    at::manual_seed(21);
    const bool bert_a = pe == PositionEncoding::kBertAbsolute || pe == PositionEncoding::kBertAbsoluteUntied;
    auto cfg = testing::small_config(pe, !bert_a, 16, 4);
    // BERT-A's padding mask needs no gradient: a drop probability of 1e-12 (nothing is
    // dropped among these few elements; the scale differs from 1 by 1e-12) makes its
    // training forward take the explicit path too.
    if (bert_a) cfg.attention_dropout = 1e-12;  // (BERT-A^d: the same padding mask)
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
