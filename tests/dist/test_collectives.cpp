// Multi-rank tests of the MPI communicator (nccl-tests style): inputs come from
// (seed, rank, tensor, element), the expected sum over ranks is computed independently
// on every rank in float64, wrong elements are counted and summed over ranks.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "dist/communicator.h"
#include "dist/device.h"
#include "dist/make_communicator.h"
#include "dist/small_collectives.h"
#include "dist/nccl_communicator.h"
#include "tests/dist/mpi_test_env.h"

namespace tupe::dist {
namespace {

using mpitest::env;
using mpitest::make_mpi_comm;
using mpitest::sum_over_ranks;

/// Integer pattern in [-16, 16] for (seed, rank, tensor k, element i).
at::Tensor pattern(int64_t numel, int64_t seed, int64_t rank, int64_t k) {
  return at::arange(numel, at::kLong).mul(7).add(seed + 11 * rank + 13 * k).remainder(33).sub(16);
}

/// fp32/fp64 inputs are pattern / 8 (exact); bf16 inputs the integers themselves, so every
/// partial sum of up to 3 ranks is exactly representable and the check can be exact.
double value_scale(at::ScalarType dtype) { return dtype == at::kBFloat16 ? 1.0 : 0.125; }

int64_t wrong_elements(const at::Tensor& got, const at::Tensor& expected_f64) {
  return got.to(at::kDouble).ne(expected_f64).sum().item<int64_t>();
}

TEST(MpiAllReduce, SweepOfSizesAndDtypesSumsExactly) {
  auto comm = make_mpi_comm();
  const int world = comm->world_size(), rank = comm->rank();
  const std::vector<std::vector<int64_t>> calls = {
      {1}, {3, 17}, {0, 1000, 1, 4097}, {65537}, {(1 << 20) + 3, 5}, {255, 256, 257}};
  int64_t wrong = 0, checked = 0, launched = 0;
  for (at::ScalarType dtype : {at::kFloat, at::kDouble, at::kBFloat16}) {
    for (size_t c = 0; c < calls.size(); ++c) {
      const int64_t seed = 1000 * static_cast<int64_t>(c) + static_cast<int64_t>(dtype);
      std::vector<at::Tensor> tensors;
      for (size_t k = 0; k < calls[c].size(); ++k)
        tensors.push_back(pattern(calls[c][k], seed, rank, k).to(at::kDouble).mul(value_scale(dtype)).to(dtype));
      comm->all_reduce(tensors, "sweep")->wait();
      ++launched;
      for (size_t k = 0; k < calls[c].size(); ++k) {
        at::Tensor expected = at::zeros({calls[c][k]}, at::kDouble);
        for (int r = 0; r < world; ++r) expected += pattern(calls[c][k], seed, r, k).to(at::kDouble);
        expected.mul_(value_scale(dtype));
        wrong += wrong_elements(tensors[k], expected);
        checked += calls[c][k];
      }
    }
  }
  EXPECT_EQ(sum_over_ranks(wrong), 0) << "elements checked per rank: " << checked;
  EXPECT_EQ(comm->counts().all_reduce, launched);
}

TEST(MpiAllReduce, OddOffsetViewsAndIntegersAndOverlappingWorks) {
  auto comm = make_mpi_comm();
  const int world = comm->world_size(), rank = comm->rank();
  int64_t wrong = 0;
  // A contiguous view at an odd storage offset: only the view changes, the sentinels stay.
  const int64_t n = 4099;
  at::Tensor big = at::full({n + 2}, 1234.0f);
  at::Tensor view = big.narrow(0, 1, n);
  view.copy_(pattern(n, 5, rank, 0).to(at::kFloat));
  // Int64 beyond float precision, launched before the float one is waited for.
  at::Tensor ints = pattern(999, 6, rank, 1).mul(int64_t{1} << 40).add(rank);
  auto w1 = comm->all_reduce({view}, "odd offset");
  auto w2 = comm->all_reduce({ints}, "int64");
  w2->wait();
  w1->wait();
  EXPECT_TRUE(w1->test());
  at::Tensor expected = at::zeros({n}, at::kDouble);
  at::Tensor expected_ints = at::zeros({999}, at::kLong);
  for (int r = 0; r < world; ++r) {
    expected += pattern(n, 5, r, 0).to(at::kDouble);
    expected_ints += pattern(999, 6, r, 1).mul(int64_t{1} << 40).add(r);
  }
  wrong += wrong_elements(view, expected);
  wrong += (big[0].item<float>() != 1234.0f) + (big[n + 1].item<float>() != 1234.0f);
  wrong += ints.ne(expected_ints).sum().item<int64_t>();
  EXPECT_EQ(sum_over_ranks(wrong), 0);
}

TEST(MpiBroadcast, EveryRootAnyDtype) {
  auto comm = make_mpi_comm();
  const int world = comm->world_size(), rank = comm->rank();
  int64_t wrong = 0;
  for (int root = 0; root < world; ++root) {
    at::Tensor f = pattern(1001, 3, rank, 0).to(at::kFloat);
    at::Tensor b = pattern(77, 4, rank, 1).to(at::kByte);
    at::Tensor d = pattern(5, 8, rank, 2).to(at::kDouble).reshape({5, 1});
    comm->broadcast({f, b, d}, root, "broadcast")->wait();
    wrong += f.ne(pattern(1001, 3, root, 0).to(at::kFloat)).sum().item<int64_t>();
    wrong += b.ne(pattern(77, 4, root, 1).to(at::kByte)).sum().item<int64_t>();
    wrong += d.ne(pattern(5, 8, root, 2).to(at::kDouble).reshape({5, 1})).sum().item<int64_t>();
  }
  EXPECT_EQ(sum_over_ranks(wrong), 0);
  EXPECT_EQ(comm->counts().broadcast, world);
  EXPECT_THROW(comm->broadcast({at::zeros({1})}, world, "bad root"), Error);
}

TEST(MpiAllGatherHost, BytesOfEveryRankInRankOrder) {
  auto comm = make_mpi_comm();
  const int world = comm->world_size(), rank = comm->rank();
  std::vector<uint8_t> local(5), all;
  for (int i = 0; i < 5; ++i) local[i] = static_cast<uint8_t>(rank * 10 + i);
  comm->all_gather_host(local, all, "gather")->wait();
  int64_t wrong = static_cast<int64_t>(all.size()) != 5 * world;
  for (int r = 0; r < world && !wrong; ++r)
    for (int i = 0; i < 5; ++i) wrong += all[r * 5 + i] != static_cast<uint8_t>(r * 10 + i);
  EXPECT_EQ(sum_over_ranks(wrong), 0);
  comm->barrier("barrier")->wait();
  EXPECT_EQ(comm->counts().all_gather, 1);
  EXPECT_EQ(comm->counts().barrier, 1);
}

TEST(MpiAllGatherValue, RecordsInRankOrderAndAnyRank) {
  auto comm = make_mpi_comm();
  const int world = comm->world_size(), rank = comm->rank();
  struct Record {
    int64_t a;
    double b;
  };
  const std::vector<Record> all = all_gather_value(*comm, Record{rank, 0.5 * rank}, "records");
  int64_t wrong = static_cast<int64_t>(all.size()) != world;
  for (int r = 0; r < world && !wrong; ++r) wrong += all[r].a != r || all[r].b != 0.5 * r;
  EXPECT_EQ(sum_over_ranks(wrong), 0);
  EXPECT_TRUE(any_rank(*comm, rank == world - 1, "last rank only"));
  EXPECT_FALSE(any_rank(*comm, false, "nobody"));
  EXPECT_EQ(comm->counts().all_gather, 3);
}

/// Expects `fn` to throw tupe::Error whose message contains `needle`.
template <class Fn>
void expect_error(Fn fn, const std::string& needle) {
  try {
    fn();
    ADD_FAILURE() << "no error; expected one mentioning '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(MpiAllReduce, WhatTheBackendLacksFailsLoudlyNamingIt) {
  auto comm = make_mpi_comm();
  expect_error([&] { comm->all_reduce({at::zeros({4}, at::kHalf)}, "half"); }, "mpi backend");
  expect_error([&] { comm->all_reduce({at::zeros({4}, at::kHalf)}, "half"); }, "Half");
  expect_error([&] { comm->all_reduce({at::zeros({4, 4}).t()}, "transposed"); }, "not contiguous");
  expect_error([&] { comm->all_reduce({at::Tensor()}, "undefined"); }, "undefined");
  EXPECT_EQ(comm->counts().all_reduce, 0);
  DistOptions nccl;
  nccl.backend = BackendKind::kNccl;
  expect_error([&] { make_communicator(env(), nccl, nullptr, at::Device(at::kCPU)); }, "nccl backend");
  DistOptions mpi;
  mpi.backend = BackendKind::kMpi;
  expect_error([&] { make_communicator(env(), mpi, nullptr, at::Device(at::kCUDA, 0)); }, "mpi backend");
  // Auto on CPU tensors picks MPI.
  EXPECT_STREQ(make_communicator(env(), DistOptions{}, nullptr, at::Device(at::kCPU))->backend_name(), "mpi");
}

TEST(NcclBackend, AllReducesOnGpusOrFailsOnEveryRankWithout) {
  const bool gpus = nccl_compiled() && at::hasCUDA() &&
                    at::getNumGPUs() >= static_cast<size_t>(env().local_world_size());
  if (!gpus) {
    // No GPU per local rank (this CPU machine): every rank learns that together (no rank is
    // left waiting for the unique id); without NCCL compiled the build says so.
    expect_error([&] { make_nccl_communicator(env(), DistOptions{}, nullptr, env().local_rank()); }, "nccl backend");
    EXPECT_EQ(sum_over_ranks(int64_t{1}), env().world_size());  // every rank got here
    return;
  }
  const at::Device device = resolve_device(env(), DeviceRequest::kCuda, "test device");
  auto comm = make_nccl_communicator(env(), DistOptions{}, &mpitest::watchdog(), device.index());
  int64_t wrong = 0;
  for (at::ScalarType dtype : {at::kFloat, at::kDouble, at::kBFloat16}) {
    at::Tensor x = pattern(100003, 9, comm->rank(), 0).to(dtype).to(device);
    comm->all_reduce({x}, "nccl sweep")->wait();
    at::Tensor expected = at::zeros({100003}, at::kDouble);
    for (int r = 0; r < comm->world_size(); ++r) expected += pattern(100003, 9, r, 0).to(at::kDouble);
    wrong += wrong_elements(x.cpu(), expected);
  }
  EXPECT_EQ(sum_over_ranks(wrong), 0);
}

}  // namespace
}  // namespace tupe::dist
