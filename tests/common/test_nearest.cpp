// "Did you mean ...?" (common/nearest.h): edit distances worked out by hand, and which
// candidates a misspelling names.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/nearest.h"

namespace tupe {
namespace {

TEST(CommonNearest, EditDistanceCountsEditsAndNeighbourSwaps) {
  EXPECT_EQ(edit_distance("", ""), 0u);
  EXPECT_EQ(edit_distance("", "abc"), 3u);
  EXPECT_EQ(edit_distance("abc", ""), 3u);
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);  // k->s, e->i, +g
  EXPECT_EQ(edit_distance("flaw", "lawn"), 2u);       // -f, +n
  EXPECT_EQ(edit_distance("max_stpes", "max_steps"), 1u);  // one swap of neighbours (pe -> ep)
  EXPECT_EQ(edit_distance("ca", "abc"), 3u);  // optimal string alignment: a swapped pair is not edited again
  EXPECT_EQ(edit_distance("pretrian", "pretrain"), 1u);
  EXPECT_EQ(edit_distance("Model", "model"), 1u);  // case-sensitive
}

TEST(CommonNearest, NearestWordsAreTheClosestWithinAThirdOfTheWord) {
  const std::vector<std::string> keys{"max_steps", "log_every", "max_micro_batch_size", "micro_batch_size", "seed"};
  EXPECT_EQ(nearest_words("max_stpes", keys), (std::vector<std::string>{"max_steps"}));
  EXPECT_EQ(nearest_words("MAX_STEPS", keys), (std::vector<std::string>{"max_steps"}));  // case-insensitive
  EXPECT_EQ(nearest_words("micro_bach_size", keys), (std::vector<std::string>{"micro_batch_size"}));
  // "sed" is 1 from "seed"; a short word allows 2 edits.
  EXPECT_EQ(nearest_words("sed", keys), (std::vector<std::string>{"seed"}));
  // Too far: 9 letters allow 3 edits; "warmup" is no misspelling of any key.
  EXPECT_TRUE(nearest_words("warmup", keys).empty());
  EXPECT_TRUE(nearest_words("", keys).empty());
  // Ties: every candidate at the least distance, in candidate order, at most `limit`.
  const std::vector<std::string> ties{"fp16", "bf16", "fp32", "fp16"};
  EXPECT_EQ(nearest_words("f16", ties), (std::vector<std::string>{"fp16", "bf16"}));  // one insertion each
  EXPECT_EQ(nearest_words("f16", ties, 1), (std::vector<std::string>{"fp16"}));
  EXPECT_EQ(nearest_words("xf16", ties), (std::vector<std::string>{"bf16"}));  // 1 (x->b) beats fp16's 2
}

TEST(CommonNearest, DidYouMeanEndsAnErrorLine) {
  const std::vector<std::string> subcommands{"vocab", "preprocess", "pretrain", "finetune", "evaluate"};
  EXPECT_EQ(did_you_mean("pretrian", subcommands), " (did you mean pretrain?)");
  EXPECT_EQ(did_you_mean("max_stpes", {"max_steps"}, "train."), " (did you mean train.max_steps?)");
  EXPECT_EQ(did_you_mean("ab", {"aa", "bb", "cb"}, "--"), " (did you mean --aa, --bb or --cb?)");
  EXPECT_EQ(did_you_mean("ab", {"aa", "bb"}), " (did you mean aa or bb?)");
  EXPECT_EQ(did_you_mean("zzzzzzzz", subcommands), "");
}

}  // namespace
}  // namespace tupe
