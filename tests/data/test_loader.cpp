// Sampler and loader: the global order is a pure function of (seed, epoch); global step t
// is the same for every world size and thread count; resume from (epoch, consumed samples)
// with another world size reproduces the next batches. Ranks are simulated in-process.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <map>
#include <set>

#include "data_pipeline/counter_rng.h"
#include "data_pipeline/loader.h"
#include "data_pipeline/shard_set.h"
#include "data_test_util.h"

namespace tupe::data_pipeline {
namespace {

constexpr int64_t kVocab = 30522;

/// N synthetic samples: [CLS] w... [SEP], lengths 5..64, ids in [1000, 30000).
std::shared_ptr<const PretrainDataset> synthetic(int64_t n, uint64_t seed = 5) {
  std::vector<std::vector<int32_t>> seqs(static_cast<size_t>(n));
  CounterRng rng(seed);
  for (auto& s : seqs) {
    const auto len = 5 + static_cast<int64_t>(rng.below(60));
    s.assign(static_cast<size_t>(len), 0);
    s.front() = 101;
    s.back() = 102;
    for (int64_t j = 1; j + 1 < len; ++j) s[static_cast<size_t>(j)] = 1000 + static_cast<int32_t>(rng.below(29000));
  }
  return make_memory_dataset(seqs, kVocab, SpecialTokens{}, 64);
}

/// A global step assembled from every rank's batch (rows in rank order).
struct GlobalStep {
  at::Tensor input_ids, attention_mask, masked_positions, masked_labels, sample_indices;
  int64_t epoch = 0, first_position = 0, global_masked_count = 0;
};

GlobalStep assemble(const std::vector<MlmBatch>& ranks) {
  GlobalStep g;
  std::vector<at::Tensor> ids, att, pos, lab, idx;
  int64_t row_offset = 0;
  const int64_t len = ranks[0].input_ids.size(1);
  int64_t masked = 0;
  for (const auto& b : ranks) {
    EXPECT_EQ(b.input_ids.size(1), len) << "ranks of one step must share the padded length";
    EXPECT_EQ(b.epoch, ranks[0].epoch);
    EXPECT_EQ(b.first_position, ranks[0].first_position);
    EXPECT_EQ(b.global_masked_count, ranks[0].global_masked_count);
    ids.push_back(b.input_ids);
    att.push_back(b.attention_mask);
    pos.push_back(b.masked_positions + row_offset * len);
    lab.push_back(b.masked_labels);
    idx.push_back(b.sample_indices);
    row_offset += b.rows();
    masked += b.masked_positions.size(0);
  }
  // Whole-word and span masks: the loader cannot count other ranks' tokens (-1 on every rank).
  if (ranks[0].global_masked_count >= 0)
    EXPECT_EQ(masked, ranks[0].global_masked_count) << "global_masked_count must be the sum over ranks";
  g.input_ids = at::cat(ids);
  g.attention_mask = at::cat(att);
  g.masked_positions = at::cat(pos);
  g.masked_labels = at::cat(lab);
  g.sample_indices = at::cat(idx);
  g.epoch = ranks[0].epoch;
  g.first_position = ranks[0].first_position;
  g.global_masked_count = ranks[0].global_masked_count;
  return g;
}

void expect_same(const GlobalStep& a, const GlobalStep& b, const std::string& what) {
  EXPECT_EQ(a.epoch, b.epoch) << what;
  EXPECT_EQ(a.first_position, b.first_position) << what;
  EXPECT_TRUE(at::equal(a.sample_indices, b.sample_indices)) << what;
  EXPECT_TRUE(at::equal(a.input_ids, b.input_ids)) << what;
  EXPECT_TRUE(at::equal(a.attention_mask, b.attention_mask)) << what;
  EXPECT_TRUE(at::equal(a.masked_positions, b.masked_positions)) << what;
  EXPECT_TRUE(at::equal(a.masked_labels, b.masked_labels)) << what;
}

/// `steps` global steps from `start` with W simulated ranks (one Loader each).
/// Word boundaries of the synthetic ids: every id divisible by 3 continues a word (so words
/// of 1 to several pieces), for the whole_word and span strategies.
std::shared_ptr<const WordBoundaries> synthetic_words() {
  std::vector<uint8_t> continues(static_cast<size_t>(kVocab), 0);
  for (int64_t id = 1000; id < kVocab; ++id) continues[static_cast<size_t>(id)] = id % 3 == 0;
  return std::make_shared<const WordBoundaries>(std::move(continues), "");
}

std::vector<GlobalStep> run(const std::shared_ptr<const PretrainDataset>& ds, DataOptions cfg, int64_t world,
                            int64_t threads, LoaderState start, int64_t steps, LoaderState* end_state = nullptr) {
  cfg.num_threads = threads;
  const auto words = cfg.mask_strategy == MaskStrategy::kToken ? nullptr : synthetic_words();
  std::vector<std::unique_ptr<Loader>> loaders;
  for (int64_t r = 0; r < world; ++r)
    loaders.push_back(std::make_unique<Loader>(ds, cfg, r, world, start, std::function<void()>{}, words));
  std::vector<GlobalStep> out;
  for (int64_t t = 0; t < steps; ++t) {
    std::vector<MlmBatch> parts;
    for (auto& l : loaders) parts.push_back(l->next());
    out.push_back(assemble(parts));
  }
  for (auto& l : loaders) EXPECT_EQ(l->state(), loaders[0]->state());
  if (end_state) *end_state = loaders[0]->state();
  return out;
}

DataOptions config(int64_t batch) {
  DataOptions c;
  c.global_batch_size = batch;
  c.seed = 77;
  c.prefetch_batches = 3;
  return c;
}

/// A dataset whose every sample read takes `ms` milliseconds (the samples of `inner`).
class SlowDataset final : public PretrainDataset {
 public:
  SlowDataset(std::shared_ptr<const PretrainDataset> inner, int ms) : inner_(std::move(inner)), ms_(ms) {}
  int64_t size() const override { return inner_->size(); }
  int64_t length(int64_t i) const override { return inner_->length(i); }
  int64_t ordinary_tokens(int64_t i) const override { return inner_->ordinary_tokens(i); }
  int64_t static_mask_count(int64_t i) const override { return inner_->static_mask_count(i); }
  void get(int64_t i, Sample& out) const override {
    std::this_thread::sleep_for(std::chrono::milliseconds(ms_));
    inner_->get(i, out);
  }
  const DatasetInfo& info() const override { return inner_->info(); }

 private:
  std::shared_ptr<const PretrainDataset> inner_;
  int ms_;
};

TEST(DataLoader, WaitSecondsIsTheTimeTheConsumerWaitedForBatches) {
  // 4 rows a batch at 10 ms a sample: 40 ms to build a batch on one worker; 8 batches.
  const auto slow = std::make_shared<SlowDataset>(synthetic(64), 10);
  DataOptions cfg = config(4);
  cfg.num_threads = 1;
  cfg.prefetch_batches = 2;
  {  // A consumer with no work of its own waits for nearly every batch: >= 70% of 8 x 40 ms.
    Loader loader(slow, cfg, 0, 1);
    for (int k = 0; k < 8; ++k) loader.next();
    EXPECT_GE(loader.wait_seconds(), 0.7 * 8 * 0.040);
  }
  {  // One taking 100 ms a step finds batches ready but the first: far below its 800 ms.
    Loader loader(slow, cfg, 0, 1);
    for (int k = 0; k < 8; ++k) {
      loader.next();
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    EXPECT_LE(loader.wait_seconds(), 0.3);
  }
  cfg.num_threads = 0;  // built in next(): every build is waited for
  Loader sync(slow, cfg, 0, 1);
  for (int k = 0; k < 4; ++k) sync.next();
  EXPECT_GE(sync.wait_seconds(), 0.9 * 4 * 0.040);
}

TEST(DataSampler, PermutationIsABijectionKeyedBySeedAndEpoch) {
  for (const int64_t n : {1, 2, 3, 5, 8, 13, 100, 1000, 4097}) {
    const EpochPermutation p(n, 9, 0);
    std::vector<int> seen(static_cast<size_t>(n), 0);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t v = p.at(i);
      ASSERT_TRUE(v >= 0 && v < n) << n;
      ++seen[static_cast<size_t>(v)];
      EXPECT_EQ(v, EpochPermutation(n, 9, 0).at(i)) << "pure function of (seed, epoch)";
    }
    EXPECT_TRUE(std::all_of(seen.begin(), seen.end(), [](int c) { return c == 1; })) << n;
    if (n >= 100) {
      int64_t same_epoch1 = 0, same_seed = 0, fixed = 0;
      const EpochPermutation e1(n, 9, 1), s2(n, 10, 0);
      for (int64_t i = 0; i < n; ++i) {
        same_epoch1 += e1.at(i) == p.at(i);
        same_seed += s2.at(i) == p.at(i);
        fixed += p.at(i) == i;
      }
      // A random permutation agrees with another in ~1 place on average.
      EXPECT_LT(same_epoch1, 10) << n;
      EXPECT_LT(same_seed, 10) << n;
      EXPECT_LT(fixed, 10) << n;
    }
  }
}

TEST(DataSampler, AdvanceEqualsSteppingAndRollsOverEpochs) {
  const GlobalSampler s(250, 12, 1);
  EXPECT_EQ(s.steps_per_epoch(), 20);  // floor(250 / 12)
  LoaderState st{3, 24};
  for (int64_t k = 0; k < 70; ++k) {
    EXPECT_EQ(s.advance({3, 24}, k), st) << k;
    st = s.advance(st, 1);
  }
  EXPECT_EQ(s.normalize({0, 240}), (LoaderState{1, 0}));  // 240 + 12 > 250: epoch exhausted
  EXPECT_EQ(s.normalize({0, 238}), (LoaderState{0, 238}));
  test::expect_error([&] { s.normalize({0, 251}); }, {"consumed_samples 251", "[0, 250]"});
  test::expect_error([] { GlobalSampler(10, 12, 1); }, {"10 samples", "global batch of 12"});
}

TEST(DataLoader, EpochCoversEverySampleOnceForEveryWorldSize) {
  const auto ds = synthetic(240);
  for (const int64_t world : {1, 2, 3}) {
    LoaderState end;
    const auto steps = run(ds, config(12), world, 1, {}, 20, &end);
    std::vector<int> seen(240, 0);
    for (const auto& st : steps) {
      EXPECT_EQ(st.epoch, 0);
      for (int64_t k = 0; k < st.sample_indices.size(0); ++k) ++seen[static_cast<size_t>(st.sample_indices[k].item<int64_t>())];
    }
    EXPECT_TRUE(std::all_of(seen.begin(), seen.end(), [](int c) { return c == 1; })) << "W=" << world;
    EXPECT_EQ(end, (LoaderState{1, 0})) << "W=" << world;
  }
}

TEST(DataLoader, PartialLastBatchIsDroppedTheSameWayForEveryWorldSize) {
  const auto ds = synthetic(250);
  std::set<int64_t> used_w1;
  for (const int64_t world : {1, 2, 3}) {
    DataOptions cfg = config(12);
    Loader probe(ds, cfg, 0, world);
    EXPECT_EQ(probe.steps_per_epoch(), 20) << "epoch length independent of W";
    const auto steps = run(ds, cfg, world, 0, {}, 21);
    std::set<int64_t> used;
    for (int t = 0; t < 20; ++t)
      for (int64_t k = 0; k < 12; ++k) used.insert(steps[static_cast<size_t>(t)].sample_indices[k].item<int64_t>());
    EXPECT_EQ(used.size(), 240u);
    if (world == 1) used_w1 = used;
    EXPECT_EQ(used, used_w1) << "the same 10 samples are dropped for W=" << world;
    EXPECT_EQ(steps[20].epoch, 1);
    EXPECT_EQ(steps[20].first_position, 0);
  }
}

/// config(batch) with data.mask_strategy = `strategy`.
DataOptions config(int64_t batch, MaskStrategy strategy) {
  DataOptions c = config(batch);
  c.mask_strategy = strategy;
  return c;
}

class DataLoaderStrategies : public ::testing::TestWithParam<MaskStrategy> {};

TEST_P(DataLoaderStrategies, GlobalStepIsIdenticalForWorldSizes123) {
  const auto ds = synthetic(300);
  // 30 steps of 12 cross the boundary of epoch 0 (25 steps).
  const auto ref = run(ds, config(12, GetParam()), 1, 0, {}, 30);
  for (const int64_t world : {2, 3}) {
    const auto got = run(ds, config(12, GetParam()), world, 2, {}, 30);
    for (size_t t = 0; t < ref.size(); ++t) expect_same(ref[t], got[t], "W=" + std::to_string(world) + " step " + std::to_string(t));
    // Other ranks' masked counts follow from sample lengths only for token masks (else -1).
    EXPECT_EQ(got[0].global_masked_count >= 0, GetParam() == MaskStrategy::kToken);
  }
  EXPECT_EQ(ref[25].epoch, 1);
  EXPECT_FALSE(at::equal(ref[0].sample_indices, ref[25].sample_indices)) << "a new epoch has a new order";
  if (GetParam() != MaskStrategy::kToken) {  // another strategy gives other masks on the same samples
    const auto token = run(ds, config(12), 1, 0, {}, 1);
    EXPECT_TRUE(at::equal(token[0].sample_indices, ref[0].sample_indices));
    EXPECT_FALSE(at::equal(token[0].masked_positions, ref[0].masked_positions));
  }
}

TEST_P(DataLoaderStrategies, ResumeReproducesNextBatchesWithOtherWorldSizeAndThreads) {
  const auto ds = synthetic(150);
  const DataOptions cfg = config(12, GetParam());  // 12 steps per epoch
  const auto ref = run(ds, cfg, 1, 0, {}, 40);
  const GlobalSampler sampler(150, 12, 77);
  for (const int64_t stop : {0, 5, 12, 23, 31}) {
    // The state a run would save after `stop` steps, taken from a run with W=2, 1 thread.
    LoaderState saved;
    run(ds, cfg, 2, 1, {}, stop, &saved);
    EXPECT_EQ(saved, sampler.advance({}, stop));
    for (const auto& [world, threads] : std::vector<std::pair<int64_t, int64_t>>{{3, 3}, {1, 0}, {2, 4}}) {
      const auto got = run(ds, cfg, world, threads, saved, 6);
      for (size_t t = 0; t < got.size(); ++t)
        expect_same(ref[static_cast<size_t>(stop) + t], got[t],
                    "resume at " + std::to_string(stop) + " W=" + std::to_string(world) + " threads=" +
                        std::to_string(threads) + " step +" + std::to_string(t));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(MaskStrategies, DataLoaderStrategies,
                         ::testing::Values(MaskStrategy::kToken, MaskStrategy::kWholeWord, MaskStrategy::kSpan),
                         [](const ::testing::TestParamInfo<MaskStrategy>& info) { return std::string(to_string(info.param)); });

TEST(DataLoader, BatchLayoutPaddingAndMasks) {
  const auto ds = synthetic(96);
  DataOptions cfg = config(32);
  Loader loader(ds, cfg, 1, 2);
  for (int step = 0; step < 3; ++step) {
    const MlmBatch b = loader.next();
    ASSERT_EQ(b.input_ids.scalar_type(), at::kLong);
    ASSERT_EQ(b.attention_mask.scalar_type(), at::kLong);
    ASSERT_EQ(b.masked_positions.scalar_type(), at::kLong);
    ASSERT_EQ(b.rows(), 16);
    EXPECT_FALSE(b.segment_ids.defined());
    // Padded length: longest of the whole global batch (both ranks) rounded up to 8.
    const GlobalSampler s(96, 32, 77);
    std::vector<int64_t> global;
    s.step_indices({0, step * 32}, global);
    int64_t longest = 0;
    for (const int64_t i : global) longest = std::max(longest, ds->length(i));
    EXPECT_EQ(b.input_ids.size(1), std::min<int64_t>(64, (longest + 7) / 8 * 8));
    const int64_t len = b.input_ids.size(1);
    Sample sample;
    std::set<int64_t> masked(b.masked_positions.data_ptr<int64_t>(),
                             b.masked_positions.data_ptr<int64_t>() + b.masked_positions.size(0));
    EXPECT_TRUE(std::is_sorted(b.masked_positions.data_ptr<int64_t>(),
                               b.masked_positions.data_ptr<int64_t>() + b.masked_positions.size(0)));
    for (int64_t r = 0; r < b.rows(); ++r) {
      ds->get(b.sample_indices[r].item<int64_t>(), sample);
      const auto n = static_cast<int64_t>(sample.token_ids.size());
      for (int64_t j = 0; j < len; ++j) {
        const int64_t got = b.input_ids[r][j].item<int64_t>();
        EXPECT_EQ(b.attention_mask[r][j].item<int64_t>(), j < n ? 1 : 0);
        if (j >= n) {
          EXPECT_EQ(got, 0) << "padding is [PAD]";
        } else if (!masked.count(r * len + j)) {
          EXPECT_EQ(got, sample.token_ids[static_cast<size_t>(j)]);
        }
      }
    }
    for (int64_t k = 0; k < b.masked_positions.size(0); ++k) {
      const int64_t p = b.masked_positions[k].item<int64_t>();
      ds->get(b.sample_indices[p / len].item<int64_t>(), sample);
      ASSERT_LT(p % len, static_cast<int64_t>(sample.token_ids.size()));
      EXPECT_EQ(b.masked_labels[k].item<int64_t>(), sample.token_ids[static_cast<size_t>(p % len)]);
    }
  }
  cfg.pad_to_max_seq_len = true;
  Loader full(ds, cfg, 0, 1);
  EXPECT_EQ(full.next().input_ids.size(1), 64);
}

TEST(DataLoader, SliceRowsRebasesMaskedPositions) {
  const auto ds = synthetic(64);
  Loader loader(ds, config(16), 0, 1);
  const MlmBatch b = loader.next();
  const MlmBatch s = slice_rows(b, 5, 11);
  const int64_t len = b.input_ids.size(1);
  EXPECT_TRUE(at::equal(s.input_ids, b.input_ids.slice(0, 5, 11)));
  std::vector<int64_t> expect_pos, expect_lab;
  for (int64_t k = 0; k < b.masked_positions.size(0); ++k) {
    const int64_t p = b.masked_positions[k].item<int64_t>();
    if (p >= 5 * len && p < 11 * len) {
      expect_pos.push_back(p - 5 * len);
      expect_lab.push_back(b.masked_labels[k].item<int64_t>());
    }
  }
  ASSERT_EQ(s.masked_positions.size(0), static_cast<int64_t>(expect_pos.size()));
  for (size_t k = 0; k < expect_pos.size(); ++k) {
    EXPECT_EQ(s.masked_positions[static_cast<int64_t>(k)].item<int64_t>(), expect_pos[k]);
    EXPECT_EQ(s.masked_labels[static_cast<int64_t>(k)].item<int64_t>(), expect_lab[k]);
  }
}

TEST(DataLoader, BadSettingsAreRefused) {
  const auto ds = synthetic(64);
  test::expect_error([&] { Loader(ds, config(16), 0, 3); }, {"global_batch_size", "16", "world size 3"});
  test::expect_error([&] { Loader(ds, config(16), 2, 2); }, {"rank 2", "world size 2"});
  test::expect_error([&] { Loader(ds, config(100), 0, 1); }, {"64 samples", "100"});
  DataOptions c = config(16);
  c.replace_with_mask = 0.95;
  test::expect_error([&] { Loader(ds, c, 0, 1); }, {"data.replace_with_random", "<= 1"});
  if (!at::hasCUDA()) {
    c = config(16);
    c.pin_memory = PinMemory::kOn;
    test::expect_error([&] { Loader(ds, c, 0, 1); }, {"data.pin_memory", "CUDA"});
  }
  // Whole words need the vocabulary's word boundaries, of the shards' vocabulary size.
  c = config(16, MaskStrategy::kWholeWord);
  test::expect_error([&] { Loader(ds, c, 0, 1); }, {"data.mask_strategy = whole_word", "tokenizer.vocab"});
  c.mask_strategy = MaskStrategy::kSpan;
  const auto small = std::make_shared<const WordBoundaries>(std::vector<uint8_t>(100, 0), "");
  test::expect_error([&] { EvalIterator(ds, c, 0, 1, small); }, {"data.mask_strategy = span", "100 ids", "30522"});
}

TEST(DataEval, CoversValidationOnceWithFixedMasks) {
  const auto ds = synthetic(50);
  DataOptions cfg = config(12);
  std::vector<int> seen(50, 0);
  std::map<int64_t, std::vector<int64_t>> labels_by_sample;
  for (int pass = 0; pass < 2; ++pass) {
    for (int64_t r = 0; r < 3; ++r) {
      EvalIterator it(ds, cfg, r, 3);
      EXPECT_EQ(it.num_steps(), 5);  // ceil(50 / 12)
      while (auto b = it.next()) {
        const int64_t len = b->rows() ? b->input_ids.size(1) : 0;
        for (int64_t k = 0; k < b->rows(); ++k) {
          const int64_t idx = b->sample_indices[k].item<int64_t>();
          if (pass == 0) ++seen[static_cast<size_t>(idx)];
          std::vector<int64_t> lab;
          for (int64_t m = 0; m < b->masked_positions.size(0); ++m) {
            const int64_t p = b->masked_positions[m].item<int64_t>();
            if (p / len == k) lab.push_back(p % len * 100000 + b->masked_labels[m].item<int64_t>());
          }
          if (pass == 0) labels_by_sample[idx] = lab;
          else EXPECT_EQ(labels_by_sample[idx], lab) << "validation masks are fixed";
        }
      }
    }
  }
  EXPECT_TRUE(std::all_of(seen.begin(), seen.end(), [](int c) { return c == 1; }));
}

}  // namespace
}  // namespace tupe::data_pipeline
