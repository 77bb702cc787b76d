// Multi-rank tests of the start-of-training agreement: rank 0's parameters reach every
// rank; differing config texts or parameter lists are reported naming the ranks.
#include <gtest/gtest.h>

#include <sstream>

#include "dist/consistency.h"
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

TEST(Consistency, ConfigMismatchNamesTheRanks) {
  auto comm = make_mpi_comm();
  EXPECT_NO_THROW(check_same_config(*comm, "[model]\nhidden_size = 128\n"));
  // Odd ranks start with a different value.
  const bool odd = comm->rank() % 2 == 1;
  std::string message;
  try {
    check_same_config(*comm, odd ? "[model]\nhidden_size = 64\n" : "[model]\nhidden_size = 128\n");
  } catch (const Error& e) {
    message = e.what();
  }
  std::ostringstream ranks;
  for (int r = 1; r < comm->world_size(); r += 2) ranks << (r > 1 ? ", " : "") << r;
  EXPECT_NE(message.find("rank(s) " + ranks.str() + " differ from rank 0"), std::string::npos) << message;
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
