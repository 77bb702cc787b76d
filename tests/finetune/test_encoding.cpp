// Encoding of GLUE examples with the pre-training tokenizer: the [CLS] A [SEP] (B [SEP])
// layout with ids looked up independently in vocab.txt (line number = id), longest-first
// truncation on hand-worked cases, segment ids and padded batches.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <fstream>
#include <map>

#include "tests/finetune/glue_test_util.h"
#include "trainer/finetune/encoding.h"

namespace tupe::finetune {
namespace {

/// Id of a whole word in vocab.txt (its 0-based line number).
int32_t vocab_id(const std::string& token) {
  static const std::map<std::string, int32_t> ids = [] {
    std::map<std::string, int32_t> m;
    std::ifstream in(testing::uncased_vocab());
    std::string line;
    int32_t i = 0;
    while (std::getline(in, line)) m.emplace(line, i++);
    return m;
  }();
  return ids.at(token);
}

TEST(GlueEncoding, LongestFirstTruncationByHand) {
  std::vector<int32_t> a{1, 2, 3, 4, 5, 6, 7}, b{11, 12, 13};
  EXPECT_TRUE(truncate_longest_first(a, b, 6));
  EXPECT_EQ(a, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(b, (std::vector<int32_t>{11, 12, 13}));
  // Ties cut B: (2, 4) -> (2, 3) -> (2, 2) -> tie -> (2, 1).
  a = {1, 2};
  b = {3, 4, 5, 6};
  EXPECT_TRUE(truncate_longest_first(a, b, 3));
  EXPECT_EQ(a, (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(b, (std::vector<int32_t>{3}));
  // Fits: untouched.
  a = {1};
  b = {};
  EXPECT_FALSE(truncate_longest_first(a, b, 1));
  EXPECT_EQ(a.size(), 1u);
  // Single sentences are cut at the end.
  a = {1, 2, 3, 4};
  EXPECT_TRUE(truncate_longest_first(a, b, 2));
  EXPECT_EQ(a, (std::vector<int32_t>{1, 2}));
}

TEST(GlueEncoding, SingleAndPairLayoutWithRealVocabulary) {
  const auto tok = testing::uncased_tokenizer();
  const int32_t cls = vocab_id("[CLS]"), sep = vocab_id("[SEP]");
  EXPECT_EQ(cls, 101);
  EXPECT_EQ(sep, 102);
  const EncodedExample single = encode_example(*tok, "Hello World", "", false, 512);
  EXPECT_EQ(single.ids, (std::vector<int32_t>{cls, vocab_id("hello"), vocab_id("world"), sep}));
  EXPECT_EQ(single.first_segment_length, 4);
  EXPECT_FALSE(single.truncated);

  const EncodedExample pair = encode_example(*tok, "the cat sat", "on the mat", true, 512);
  EXPECT_EQ(pair.ids, (std::vector<int32_t>{cls, vocab_id("the"), vocab_id("cat"), vocab_id("sat"), sep, vocab_id("on"),
                                            vocab_id("the"), vocab_id("mat"), sep}));
  EXPECT_EQ(pair.first_segment_length, 5);

  // max_length 7 leaves 4 text tokens: (3, 3) -> tie cuts B (3, 2) -> A (2, 2).
  const EncodedExample cut = encode_example(*tok, "the cat sat", "on the mat", true, 7);
  EXPECT_TRUE(cut.truncated);
  EXPECT_EQ(cut.ids, (std::vector<int32_t>{cls, vocab_id("the"), vocab_id("cat"), sep, vocab_id("on"), vocab_id("the"),
                                           sep}));
  EXPECT_EQ(cut.first_segment_length, 4);
  EXPECT_THROW(encode_example(*tok, "a", "b", true, 2), Error);
}

TEST(GlueEncoding, BatchPaddingMaskAndSegments) {
  EncodedSplit split;
  split.ids = {{101, 7, 8, 102, 9, 102}, {101, 5, 102}};
  split.first_segment_length = {4, 3};
  split.labels = {1, 0};
  const TaskBatch b = make_batch(split, {1, 0}, /*pad_id=*/0, /*with_segments=*/true, c10::Device(c10::kCPU));
  ASSERT_EQ(b.input_ids.sizes(), (at::IntArrayRef{2, 6}));
  EXPECT_TRUE(at::equal(b.input_ids, at::tensor({101, 5, 102, 0, 0, 0, 101, 7, 8, 102, 9, 102}, at::kLong).view({2, 6})));
  EXPECT_TRUE(at::equal(b.attention_mask, at::tensor({1, 1, 1, 0, 0, 0, 1, 1, 1, 1, 1, 1}, at::kLong).view({2, 6})));
  EXPECT_TRUE(at::equal(b.segment_ids, at::tensor({0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1}, at::kLong).view({2, 6})));
  EXPECT_TRUE(at::equal(b.labels, at::tensor({0, 1}, at::kLong)));
  EXPECT_FALSE(b.scores.defined());
  const TaskBatch no_seg = make_batch(split, {0}, 0, false, c10::Device(c10::kCPU));
  EXPECT_FALSE(no_seg.segment_ids.defined());
}

TEST(GlueEncoding, RealSplitRespectsMaxLength) {
  const auto tok = testing::uncased_tokenizer();
  const TaskSpec& rte = find_task("RTE", "t");
  const SplitData dev = read_split(rte, rte.dev[0], testing::glue_dir());
  const int64_t max_length = 64;
  const EncodedSplit one = encode_split(*tok, rte, dev, true, max_length, 1);
  const EncodedSplit three = encode_split(*tok, rte, dev, true, max_length, 3);
  ASSERT_EQ(one.size(), 277u);
  EXPECT_EQ(one.ids, three.ids);  // threads do not change the result
  int64_t truncated = 0;
  for (size_t i = 0; i < one.size(); ++i) {
    const auto& ids = one.ids[i];
    ASSERT_LE(static_cast<int64_t>(ids.size()), max_length);
    EXPECT_EQ(ids.front(), 101);
    EXPECT_EQ(ids.back(), 102);
    EXPECT_EQ(ids[static_cast<size_t>(one.first_segment_length[i]) - 1], 102);
    // Untruncated examples are the concatenation of the two tokenisations.
    const auto a = tok->encode(dev.examples[i].text_a), b = tok->encode(dev.examples[i].text_b);
    if (a.size() + b.size() + 3 > static_cast<size_t>(max_length)) {
      ++truncated;
      EXPECT_EQ(static_cast<int64_t>(ids.size()), max_length);
    } else {
      EXPECT_EQ(ids.size(), a.size() + b.size() + 3);
    }
  }
  EXPECT_EQ(one.truncated, truncated);
  EXPECT_GT(truncated, 0);  // RTE premises are long
  EXPECT_EQ(one.labels.size(), 277u);
}

}  // namespace
}  // namespace tupe::finetune
