// Multi-rank tests of the start-of-training agreement: rank 0's parameters reach every
// rank; differing parameter lists are reported naming the ranks; differing config or data
// descriptions are reported with the first differing key and both values (small_collectives.h).
#include <gtest/gtest.h>

#include <sstream>

#include "dist/small_collectives.h"
#include "dist/consistency.h"
#include "dist/mpi_env.h"
#include "tests/dist/ddp_test_model.h"
#include "tests/dist/mpi_test_env.h"

namespace tupe::dist {
namespace {

using namespace mpitest;  // NOLINT: the test helpers

TEST(Consistency, BroadcastGivesEveryRankRank0sParameters) {
  auto comm = make_mpi_comm();
  Net net(false, false);
  init_params(*net, 500 + comm->rank());
  // A non-contiguous tensor too (goes through a contiguous copy).
  at::Tensor transposed = at::randn({3, 5}, generator(600 + comm->rank())).t();
  auto tensors = named_params(*net);
  tensors.push_back({"transposed", transposed});
  broadcast_tensors(*comm, tensors, 0);
  // Rank 0's values, recomputed independently on every rank.
  Net expected(false, false);
  init_params(*expected, 500);
  int64_t wrong = 0;
  auto got = named_params(*net), want = named_params(*expected);
  for (size_t p = 0; p < got.size(); ++p) wrong += got[p].tensor.ne(want[p].tensor).sum().item<int64_t>();
  wrong += transposed.ne(at::randn({3, 5}, generator(600)).t()).sum().item<int64_t>();
  EXPECT_EQ(sum_over_ranks(wrong), 0);
  EXPECT_NO_THROW(check_same_parameters(*comm, named_params(*net)));
}

TEST(Agreement, ConfigMismatchNamesTheFirstDifferingKeyAndBothValues) {
  const MpiEnv& e = env();
  const KeyValues same = {{"model.hidden_size", "128"}, {"model.num_layers", "2"}, {"data.seed", "1"}};
  EXPECT_EQ(first_difference(e, "config check", config_entries(same)), "");
  // Odd ranks differ in model.num_layers; the lowest of them (rank 1) is named, with the key
  // and both values.
  const bool odd = e.rank() % 2 == 1;
  const KeyValues config =
      odd ? KeyValues{{"model.hidden_size", "128"}, {"model.num_layers", "4"}, {"data.seed", "1"}} : same;
  std::string message;
  try {
    require_agreement(e, "config check", config_entries(config));
  } catch (const Error& err) {
    message = err.what();
  }
  EXPECT_EQ(message, "config check: rank 1 differs from rank 0 at model.num_layers: rank 0 has '2', rank 1 has '4'");
}

TEST(Agreement, MissingEntryAndDifferentKeysAreNamed) {
  const MpiEnv& e = env();
  const int last = e.world_size() - 1;
  std::vector<AgreementEntry> entries = {{"train shard 0", "a.h5, 10 bytes"}, {"train shard 1", "b.h5, 20 bytes"}};
  if (e.rank() == last) entries.pop_back();
  EXPECT_EQ(first_difference(e, "data check", entries),
            "data check: rank " + std::to_string(last) +
                " differs from rank 0 in the number of entries: rank 0 has 2, rank " + std::to_string(last) +
                " has 1 (first extra: train shard 1)");
  std::vector<AgreementEntry> renamed = {{e.rank() == last ? "validation shard 0" : "train shard 0", "x"}};
  EXPECT_EQ(first_difference(e, "data check", renamed),
            "data check: rank " + std::to_string(last) + " differs from rank 0 at entry 1: rank 0 has train shard 0, rank " +
                std::to_string(last) + " has validation shard 0");
  // A long rank-0 text reaches every rank intact.
  const std::string big(100000, 'q');
  EXPECT_EQ(broadcast_string(e, e.rank() == 0 ? big : std::string("other"), "big text"), big);
}

TEST(Agreement, FirstErrorIsTheLowestFailingRanksAndSumsAddUp) {
  const MpiEnv& e = env();
  const int world = e.world_size();
  EXPECT_EQ(first_error(e, "", "no error"), "");
  // Every rank but 0 fails with its own message: every rank gets rank 1's (rank 0's on one rank).
  const std::string mine = e.rank() == 0 && world > 1 ? "" : "error of rank " + std::to_string(e.rank());
  EXPECT_EQ(first_error(e, mine, "errors"), world > 1 ? "error of rank 1" : "error of rank 0");
  const std::vector<int64_t> sums = sum_over_ranks(e, {int64_t{1}, int64_t{e.rank()}, int64_t{1} << 40}, "sums");
  EXPECT_EQ(sums, (std::vector<int64_t>{world, int64_t{world} * (world - 1) / 2, int64_t{world} << 40}));
  barrier(e, "barrier");
}

TEST(Consistency, ParameterMismatchNamesTheRanksAndCounts) {
  auto comm = make_mpi_comm();
  const int last = comm->world_size() - 1;
  // The last rank has an extra layer.
  Net net(false, /*with_unused=*/comm->rank() == last);
  std::string message;
  try {
    check_same_parameters(*comm, named_params(*net));
  } catch (const Error& e) {
    message = e.what();
  }
  EXPECT_NE(message.find("rank(s) " + std::to_string(last) + " differ"), std::string::npos) << message;
  EXPECT_NE(message.find("rank " + std::to_string(last) + ": 8 parameters"), std::string::npos) << message;
  EXPECT_NE(message.find("rank 0: 6 parameters"), std::string::npos) << message;
  // Same count, one shape differs.
  std::vector<NamedParameter> params{{"w", at::zeros({comm->rank() == last ? 5 : 4})}};
  EXPECT_THROW(check_same_parameters(*comm, params), Error);
}

TEST(Consistency, Fnv1aMatchesPublishedVectors) {
  // Test vectors of the FNV-1a 64-bit hash (IETF draft-eastlake-fnv).
  EXPECT_EQ(fnv1a_64(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(fnv1a_64("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(fnv1a_64("foobar"), 0x85944171f73967e8ull);
}

}  // namespace
}  // namespace tupe::dist
