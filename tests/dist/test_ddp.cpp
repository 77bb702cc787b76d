// Multi-rank tests of DistributedDataParallel on a small Linear model: after backward +
// finish_grad_sync every rank's gradients equal the SUM over ranks of each rank's gradient,
// which every rank recomputes independently in float64 (inputs from (seed, rank)).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <map>
#include <string>

#include "dist/consistency.h"
#include "dist/ddp.h"
#include "tests/dist/ddp_test_model.h"
#include "tests/dist/mpi_test_env.h"

namespace tupe::dist {
namespace {

using namespace mpitest;  // NOLINT: the test helpers

constexpr int64_t kInitSeed = 4242, kDataSeed = 77;

/// A model with rank 0's initial parameters on every rank: each rank draws different
/// values (seed + rank), then rank 0's are broadcast.
Net make_net(Communicator& comm, bool shuffled = false, bool with_unused = false) {
  Net net(shuffled, with_unused);
  init_params(*net, kInitSeed + comm.rank());
  broadcast_tensors(comm, named_params(*net), 0);
  return net;
}

/// The (rank, micro) batches of all ranks for micro-steps 0..micro_steps-1.
std::vector<std::pair<int64_t, int64_t>> all_batches(int world, int micro_steps) {
  std::vector<std::pair<int64_t, int64_t>> out;
  for (int r = 0; r < world; ++r)
    for (int m = 0; m < micro_steps; ++m) out.emplace_back(r, m);
  return out;
}

/// Elements of `got` farther than atol + rtol |ref| from the float64 reference.
int64_t count_far(const at::Tensor& got, const at::Tensor& ref, double rtol, const at::Tensor& atol) {
  return got.to(at::kDouble).sub(ref).abs().gt(atol.add(ref.abs().mul(rtol))).sum().item<int64_t>();
}

/// Wrong gradient elements against `scale` x the reference sum (fp32 tolerance).
int64_t wrong_vs_reference(Net& net, const Reference& ref, double scale) {
  int64_t wrong = 0;
  for (auto& item : net->named_parameters()) {
    const at::Tensor want = ref.sum.at(item.key()).mul(scale);
    const at::Tensor atol = at::full_like(want, 1e-5 * std::max(1.0, want.abs().max().item<double>()));
    wrong += count_far(item.value().grad(), want, 1e-5, atol);
  }
  return wrong;
}

/// One optimizer step's gradient work: micro-steps m = 0..n-1 with DDP.
void grad_step(Net& net, DistributedDataParallel& ddp, int rank, int micro_steps) {
  ddp.begin_step();
  for (int m = 0; m < micro_steps; ++m) {
    auto [x, y] = batch(kDataSeed, rank, m);
    const at::Tensor l = loss(net, x, y);
    ddp.prepare_for_backward(m == micro_steps - 1);
    l.backward();
  }
  ddp.finish_grad_sync();
}

TEST(Ddp, GradientsAreTheSumOverRanksForEveryBucketSize) {
  auto comm = make_mpi_comm();
  const Reference ref = reference_grads(false, false, kInitSeed, kDataSeed, all_batches(comm->world_size(), 1));
  // 64 B: every parameter alone (most larger than the cap); 600 B: mixed; 1 MiB: one bucket.
  for (int64_t cap : {64, 600, 1 << 20}) {
    Net net = make_net(*comm);
    DistOptions options;
    options.bucket_size_bytes = cap;
    DistributedDataParallel ddp(*comm, named_params(*net), options);
    const int64_t before = comm->counts().all_reduce;
    grad_step(net, ddp, comm->rank(), 1);
    EXPECT_EQ(sum_over_ranks(wrong_vs_reference(net, ref, 1.0)), 0) << "bucket cap " << cap;
    EXPECT_EQ(comm->counts().all_reduce - before, static_cast<int64_t>(ddp.num_buckets())) << "cap " << cap;
    if (cap == 64) {
      EXPECT_EQ(ddp.num_buckets(), ddp.params().size());
    }
    if (cap == (1 << 20)) {
      EXPECT_EQ(ddp.num_buckets(), 1u);
    }
  }
}

TEST(Ddp, AccumulationOverTwoMicroStepsEqualsOneBigStepWithoutEarlyAllReduce) {
  auto comm = make_mpi_comm();
  const int rank = comm->rank();
  DistOptions options;
  options.bucket_size_bytes = 600;
  // Two micro-steps.
  Net net = make_net(*comm);
  DistributedDataParallel ddp(*comm, named_params(*net), options);
  ddp.begin_step();
  ddp.prepare_for_backward(false);
  {
    auto [x, y] = batch(kDataSeed, rank, 0);
    loss(net, x, y).backward();
  }
  const int64_t after_first = comm->counts().all_reduce;
  EXPECT_THROW(ddp.finish_grad_sync(), Error);  // after an accumulation micro-step: out of order
  ddp.prepare_for_backward(true);
  {
    auto [x, y] = batch(kDataSeed, rank, 1);
    loss(net, x, y).backward();
  }
  // Overlap: the buckets were launched by the hooks during backward, before finish.
  const int64_t after_backward = ddp.buckets_launched();
  ddp.finish_grad_sync();
  EXPECT_EQ(sum_over_ranks(after_first), 0) << "all-reduce on a non-last micro-step";
  EXPECT_EQ(after_backward, static_cast<int64_t>(ddp.num_buckets()));
  EXPECT_EQ(comm->counts().all_reduce, static_cast<int64_t>(ddp.num_buckets()));
  // One big step on the concatenated batch.
  Net big = make_net(*comm);
  DistributedDataParallel big_ddp(*comm, named_params(*big), options);
  big_ddp.begin_step();
  big_ddp.prepare_for_backward(true);
  {
    auto [x0, y0] = batch(kDataSeed, rank, 0);
    auto [x1, y1] = batch(kDataSeed, rank, 1);
    loss(big, at::cat({x0, x1}), at::cat({y0, y1})).backward();
  }
  big_ddp.finish_grad_sync();
  int64_t differ = 0;
  auto small_params = named_params(*net), big_params = named_params(*big);
  for (size_t p = 0; p < small_params.size(); ++p) {
    const at::Tensor b = big_params[p].tensor.grad().to(at::kDouble);
    differ += count_far(small_params[p].tensor.grad(), b, 1e-5, at::full_like(b, 1e-5));
  }
  EXPECT_EQ(sum_over_ranks(differ), 0);
  const Reference ref = reference_grads(false, false, kInitSeed, kDataSeed, all_batches(comm->world_size(), 2));
  EXPECT_EQ(sum_over_ranks(wrong_vs_reference(net, ref, 1.0)), 0);
}

TEST(Ddp, Bf16ReductionIsWithinBf16Tolerance) {
  auto comm = make_mpi_comm();
  const int world = comm->world_size();
  DistOptions options;
  options.bucket_size_bytes = 600;
  options.reduce_dtype = ReduceDtype::kBf16;
  Net net = make_net(*comm);
  DistributedDataParallel ddp(*comm, named_params(*net), options);
  grad_step(net, ddp, comm->rank(), 1);
  const Reference ref = reference_grads(false, false, kInitSeed, kDataSeed, all_batches(world, 1));
  // Each of the W inputs and W - 1 partial sums is rounded to bf16 (unit roundoff 2^-8).
  const double u = std::ldexp(1.0, -8);
  int64_t wrong = 0, inexact = 0;
  for (auto& item : net->named_parameters()) {
    const at::Tensor& want = ref.sum.at(item.key());
    const at::Tensor bound = ref.abs_sum.at(item.key()).mul(u * (2 * world)).add(1e-6);
    const at::Tensor err = item.value().grad().to(at::kDouble).sub(want).abs();
    wrong += err.gt(bound).sum().item<int64_t>();
    inexact += err.gt(1e-5 * (1 + want.abs().max().item<double>())).sum().item<int64_t>();
  }
  EXPECT_EQ(sum_over_ranks(wrong), 0);
  // The reduction really went through bf16: some elements differ beyond fp32 rounding.
  EXPECT_GT(sum_over_ranks(inexact), 0);
}

// reduce_dtype fp64: a global batch of 12 micro-batches (index i), split over the W ranks
// contiguously (rank r takes i in [r 12/W, (r+1) 12/W)) or strided (i = r mod W), as
// 12/W micro-steps. Every rank recomputes all 12 micro-batch gradients alone in fp32, sums
// them in float64 in index order and rounds once: the DDP result equals that BITWISE, for
// both splits and under np2 and np3 alike (6 and 4 micro-steps per rank), i.e. the step's
// gradient does not depend on the world size. In fp32 the partial sums' rounding depends on
// the split; the fp32 run below is only checked within fp32 tolerance.
TEST(Ddp, Fp64SumIsBitwiseTheSameForEverySplitOverRanksAndMicroSteps) {
  auto comm = make_mpi_comm();
  const int world = comm->world_size(), rank = comm->rank();
  constexpr int kMicroBatches = 12;
  ASSERT_EQ(kMicroBatches % world, 0) << "run with 1, 2, 3, 4 or 6 ranks";
  const int per_rank = kMicroBatches / world;
  // The independent result: each micro-batch's fp32 gradient, summed in float64, rounded once.
  Net alone = make_net(*comm);
  std::map<std::string, at::Tensor> want;
  for (int i = 0; i < kMicroBatches; ++i) {
    for (auto& p : alone->parameters()) p.mutable_grad() = at::Tensor();
    auto [x, y] = batch(kDataSeed, 0, i);
    loss(alone, x, y).backward();
    for (auto& item : alone->named_parameters()) {
      const at::Tensor g = item.value().grad().to(at::kDouble);
      want[item.key()] = want.count(item.key()) ? want[item.key()].add(g) : g;
    }
  }
  for (const bool strided : {false, true}) {
    for (const ReduceDtype dtype : {ReduceDtype::kFp64, ReduceDtype::kFp32}) {
      Net net = make_net(*comm);
      DistOptions options;
      options.bucket_size_bytes = 600;
      options.reduce_dtype = dtype;
      DistributedDataParallel ddp(*comm, named_params(*net), options);
      ddp.begin_step();
      for (int m = 0; m < per_rank; ++m) {
        const int i = strided ? m * world + rank : rank * per_rank + m;
        auto [x, y] = batch(kDataSeed, 0, i);
        ddp.prepare_for_backward(m == per_rank - 1);
        loss(net, x, y).backward();
        if (dtype == ReduceDtype::kFp64 && m + 1 < per_rank) {  // mid-step, fp64: .grad reads zero (dist/ddp.h)
          EXPECT_EQ(ddp.buffer().data().abs().sum().item<double>(), 0.0);
        }
      }
      ddp.finish_grad_sync();
      int64_t differ = 0, far = 0;
      for (auto& item : net->named_parameters()) {
        const at::Tensor& got = item.value().grad();
        ASSERT_EQ(got.scalar_type(), at::kFloat);
        const at::Tensor rounded = want.at(item.key()).to(at::kFloat);
        differ += got.ne(rounded).sum().item<int64_t>();
        far += count_far(got, want.at(item.key()), 1e-5, at::full_like(want.at(item.key()), 1e-5));
      }
      EXPECT_EQ(sum_over_ranks(far), 0) << (strided ? "strided" : "contiguous");
      if (dtype == ReduceDtype::kFp64) {
        EXPECT_EQ(sum_over_ranks(differ), 0) << (strided ? "strided" : "contiguous") << " split over " << world
                                             << " ranks: fp64 sums differ from the once-rounded float64 sum";
      }
    }
  }
}

TEST(Ddp, OutOfOrderReadinessStillLaunchesInBucketOrderAndSums) {
  auto comm = make_mpi_comm();
  DistOptions options;
  options.bucket_size_bytes = 200;
  Net net = make_net(*comm, /*shuffled=*/true);
  DistributedDataParallel ddp(*comm, named_params(*net), options);
  // Layout is reverse registration (l2, l1, l3), backward produces l3 first: its buckets
  // are the last ones but become ready first.
  ASSERT_EQ(ddp.params().front().name, "l3.weight");
  EXPECT_EQ(ddp.buffer().slots()[0].bucket, ddp.num_buckets() - 1);
  grad_step(net, ddp, comm->rank(), 1);
  EXPECT_EQ(ddp.buckets_launched(), static_cast<int64_t>(ddp.num_buckets()));
  const Reference ref = reference_grads(true, false, kInitSeed, kDataSeed, all_batches(comm->world_size(), 1));
  EXPECT_EQ(sum_over_ranks(wrong_vs_reference(net, ref, 1.0)), 0);
}

TEST(Ddp, UnusedParametersRaiseNamingThem) {
  auto comm = make_mpi_comm();
  DistOptions options;
  options.bucket_size_bytes = 600;
  Net net = make_net(*comm, false, /*with_unused=*/true);
  DistributedDataParallel ddp(*comm, named_params(*net), options);
  ddp.begin_step();
  ddp.prepare_for_backward(true);
  auto [x, y] = batch(kDataSeed, comm->rank(), 0);
  loss(net, x, y).backward();
  std::string message;
  try {
    ddp.finish_grad_sync();
  } catch (const Error& e) {
    message = e.what();
  }
  EXPECT_NE(message.find("2 of 8 parameters never received a gradient"), std::string::npos) << message;
  EXPECT_NE(message.find("unused.weight"), std::string::npos) << message;
  EXPECT_NE(message.find("unused.bias"), std::string::npos) << message;
  EXPECT_EQ(message.find("l1.weight"), std::string::npos) << message;
  // finish without any backward reports every parameter.
  ddp.begin_step();
  ddp.prepare_for_backward(true);
  EXPECT_THROW(ddp.finish_grad_sync(), Error);
}

TEST(Ddp, CallsOutOfOrderAreOneErrorEachAndLeaveTheSumAlone) {
  auto comm = make_mpi_comm();
  DistOptions options;
  options.bucket_size_bytes = 600;
  Net net = make_net(*comm);
  DistributedDataParallel ddp(*comm, named_params(*net), options);
  const auto error_of = [](const std::function<void()>& f) {
    try {
      f();
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  // Before begin_step, prepare_for_backward and finish are refused (no collective started).
  EXPECT_NE(error_of([&] { ddp.prepare_for_backward(true); }).find("prepare_for_backward before begin_step"),
            std::string::npos);
  EXPECT_NE(error_of([&] { ddp.finish_grad_sync(); }).find("finish_grad_sync before begin_step"), std::string::npos);
  // A backward without prepare_for_backward: the first gradient's hook refuses it.
  ddp.begin_step();
  auto [x, y] = batch(kDataSeed, comm->rank(), 0);
  EXPECT_NE(error_of([&] { loss(net, x, y).backward(); }).find("call prepare_for_backward before each backward"),
            std::string::npos);
  grad_step(net, ddp, comm->rank(), 1);
  // A second finish in one step, and a second last micro-step, are refused; the sum stays.
  EXPECT_NE(error_of([&] { ddp.finish_grad_sync(); }).find("finish_grad_sync after finish_grad_sync"),
            std::string::npos);
  EXPECT_NE(error_of([&] { ddp.prepare_for_backward(true); }).find("call begin_step first"), std::string::npos);
  const Reference ref = reference_grads(false, false, kInitSeed, kDataSeed, all_batches(comm->world_size(), 1));
  EXPECT_EQ(sum_over_ranks(wrong_vs_reference(net, ref, 1.0)), 0);
}

TEST(Ddp, CountTravelsWithTheSyncAndARankWithoutBackwardJoins) {
  // Rank r counts r + 1 terms; the last rank has no micro-batch: it joins with count 0 and
  // sync_without_backward, and every rank gets the sum of the others' gradients and counts.
  auto comm = make_mpi_comm();
  const int rank = comm->rank(), world = comm->world_size();
  DistOptions options;
  options.bucket_size_bytes = 600;
  Net net = make_net(*comm);
  DistributedDataParallel ddp(*comm, named_params(*net), options);
  const bool idle = rank == world - 1;
  for (int step = 0; step < 2; ++step) {  // twice: the count and the readiness reset per step
    ddp.begin_step();
    const int64_t before = comm->counts().all_reduce;
    if (idle) {
      ddp.prepare_for_backward(true, 0);
      ddp.sync_without_backward();
    } else {
      auto [x, y] = batch(kDataSeed, rank, 0);
      const at::Tensor l = loss(net, x, y);
      ddp.prepare_for_backward(true, rank + 1);
      l.backward();
    }
    ddp.finish_grad_sync();
    // One count all-reduce and one per bucket, on every rank alike.
    EXPECT_EQ(comm->counts().all_reduce - before, static_cast<int64_t>(ddp.num_buckets()) + 1);
    std::vector<std::pair<int64_t, int64_t>> batches;
    int64_t want_count = 0;
    for (int r = 0; r + 1 < world; ++r) {
      batches.emplace_back(r, 0);
      want_count += r + 1;
    }
    EXPECT_EQ(ddp.global_count().scalar_type(), at::kDouble);
    EXPECT_EQ(ddp.global_count().item<double>(), static_cast<double>(want_count)) << "step " << step;
    const Reference ref = reference_grads(false, false, kInitSeed, kDataSeed, batches);
    if (world > 1) {
      EXPECT_EQ(sum_over_ranks(wrong_vs_reference(net, ref, 1.0)), 0) << "step " << step;
    }
  }
  // The count is refused when negative, on an accumulation micro-step, or with a second last
  // micro-step; sync_without_backward before the last micro-step is prepared.
  ddp.begin_step();
  EXPECT_THROW(ddp.prepare_for_backward(true, -1), Error);
  EXPECT_THROW(ddp.prepare_for_backward(false, 1), Error);
  EXPECT_THROW(ddp.sync_without_backward(), Error);
  ddp.prepare_for_backward(false);
  EXPECT_THROW(ddp.sync_without_backward(), Error);
  ddp.prepare_for_backward(true, 1);
  EXPECT_THROW(ddp.prepare_for_backward(true, 1), Error);
  ddp.sync_without_backward();
  ddp.finish_grad_sync();
  EXPECT_EQ(ddp.global_count().item<double>(), static_cast<double>(world));
}

TEST(Ddp, ConsecutiveStepsZeroTheBufferAndDetectADetachedGrad) {
  auto comm = make_mpi_comm();
  DistOptions options;
  options.bucket_size_bytes = 600;
  Net net = make_net(*comm);
  DistributedDataParallel ddp(*comm, named_params(*net), options);
  grad_step(net, ddp, comm->rank(), 1);
  ddp.begin_step();
  EXPECT_EQ(ddp.buffer().data().abs().sum().item<double>(), 0.0);
  for (auto& p : net->parameters()) EXPECT_EQ(p.grad().abs().sum().item<double>(), 0.0);
  // A second step (same data): same result as a first step.
  grad_step(net, ddp, comm->rank(), 1);
  const Reference ref = reference_grads(false, false, kInitSeed, kDataSeed, all_batches(comm->world_size(), 1));
  EXPECT_EQ(sum_over_ranks(wrong_vs_reference(net, ref, 1.0)), 0);
  // Module::zero_grad() sets .grad to None: the hook notices (before any collective).
  net->zero_grad();
  std::string message;
  try {
    auto [x, y] = batch(kDataSeed, comm->rank(), 0);
    loss(net, x, y).backward();
  } catch (const std::exception& e) {
    message = e.what();
  }
  EXPECT_NE(message.find("no longer views the gradient buffer"), std::string::npos) << message;
  // begin_step re-attaches; training goes on.
  grad_step(net, ddp, comm->rank(), 1);
  EXPECT_EQ(sum_over_ranks(wrong_vs_reference(net, ref, 1.0)), 0);
}

TEST(Ddp, HooksAreRemovedWithTheObject) {
  auto comm = make_mpi_comm();
  Net net = make_net(*comm);
  {
    DistOptions options;
    options.bucket_size_bytes = 600;
    DistributedDataParallel ddp(*comm, named_params(*net), options);
    grad_step(net, ddp, comm->rank(), 1);
  }
  const int64_t before = comm->counts().all_reduce;
  std::vector<at::Tensor> reduced;
  for (auto& p : net->parameters()) reduced.push_back(p.grad().clone());
  auto [x, y] = batch(kDataSeed, comm->rank(), 0);
  loss(net, x, y).backward();  // no hook: plain local accumulation, no collective
  EXPECT_EQ(comm->counts().all_reduce, before);
  const Reference local = reference_grads(false, false, kInitSeed, kDataSeed, {{comm->rank(), 0}});
  int64_t wrong = 0;
  size_t i = 0;
  for (auto& item : net->named_parameters()) {
    const at::Tensor want = reduced[i++].to(at::kDouble).add(local.sum.at(item.key()));
    wrong += count_far(item.value().grad(), want, 1e-5, at::full_like(want, 1e-5));
  }
  EXPECT_EQ(sum_over_ranks(wrong), 0);
}

}  // namespace
}  // namespace tupe::dist
