// Single-process tests of dist/: bucket assignment at the edges, the gradient buffer
// layout, DistOptions parsing/validation, the test-only stall injection's environment
// variable, the watchdog with a recording abort, and the
// device plan (which GPU each rank takes) for cluster layouts described as data.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "dist/bucket.h"
#include "dist/device.h"
#include "dist/grad_buffer.h"
#include "dist/options.h"
#include "dist/stall_injection.h"
#include "dist/watchdog.h"

namespace tupe::dist {
namespace {

using Buckets = std::vector<std::vector<size_t>>;

// ---- compute_bucket_assignment -----------------------------------------------------------

TEST(DistBucketAssignment, ExactlyCapFillsOneBucket) {
  EXPECT_EQ(compute_bucket_assignment({100}, 100), (Buckets{{0}}));
  EXPECT_EQ(compute_bucket_assignment({60, 40}, 100), (Buckets{{0, 1}}));
  EXPECT_EQ(compute_bucket_assignment({60, 40, 1}, 100), (Buckets{{0, 1}, {2}}));
}

TEST(DistBucketAssignment, OneByteOverStartsANewBucket) {
  EXPECT_EQ(compute_bucket_assignment({60, 41}, 100), (Buckets{{0}, {1}}));
  EXPECT_EQ(compute_bucket_assignment({99, 1, 1}, 100), (Buckets{{0, 1}, {2}}));
  EXPECT_EQ(compute_bucket_assignment({50, 50, 50, 50, 1}, 100), (Buckets{{0, 1}, {2, 3}, {4}}));
}

TEST(DistBucketAssignment, ParameterLargerThanCapIsAlone) {
  EXPECT_EQ(compute_bucket_assignment({101}, 100), (Buckets{{0}}));
  EXPECT_EQ(compute_bucket_assignment({1, 250, 1}, 100), (Buckets{{0}, {1}, {2}}));
  EXPECT_EQ(compute_bucket_assignment({60, 40, 1, 200, 5}, 100), (Buckets{{0, 1}, {2}, {3}, {4}}));
}

TEST(DistBucketAssignment, EmptyAndZeroSizedAndErrors) {
  EXPECT_TRUE(compute_bucket_assignment({}, 100).empty());
  EXPECT_EQ(compute_bucket_assignment({0, 100, 0}, 100), (Buckets{{0, 1, 2}}));
  EXPECT_THROW(compute_bucket_assignment({1}, 0), Error);
  EXPECT_THROW(compute_bucket_assignment({1, -1}, 10), Error);
}

TEST(DistBucketAssignment, EveryIndexOnceAndCapRespected) {
  // Pseudo-random sizes; check the invariants independently of the algorithm.
  std::vector<int64_t> sizes;
  uint64_t x = 88172645463325252ull;
  for (int i = 0; i < 500; ++i) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    sizes.push_back(static_cast<int64_t>(x % 3000));
  }
  const int64_t cap = 1000;
  const auto buckets = compute_bucket_assignment(sizes, cap);
  size_t next = 0;
  for (size_t b = 0; b < buckets.size(); ++b) {
    int64_t bytes = 0;
    for (size_t i : buckets[b]) {
      EXPECT_EQ(i, next++);
      bytes += sizes[i];
    }
    if (buckets[b].size() > 1) {
      EXPECT_LE(bytes, cap);
    }
    // Greedy: the first parameter of the next bucket would not have fitted.
    if (b + 1 < buckets.size()) {
      EXPECT_GT(bytes + sizes[buckets[b + 1].front()], cap);
    }
  }
  EXPECT_EQ(next, sizes.size());
}

// ---- GradBuffer --------------------------------------------------------------------------

std::vector<NamedParameter> make_params(const std::vector<std::vector<int64_t>>& shapes) {
  std::vector<NamedParameter> out;
  for (size_t i = 0; i < shapes.size(); ++i) {
    std::string name = "p";  // (not "p" + to_string: GCC 12 -Wstringop-overflow false positive)
    name += std::to_string(i);
    out.push_back({name, at::randn(shapes[i]).requires_grad_(true)});
  }
  return out;
}

TEST(DistGradBuffer, ReverseLayoutAlignedBucketsAndViews) {
  // fp32: 10, 30, 7, 64, 3 elements = 40, 120, 28, 256, 12 bytes; cap 128 bytes.
  auto params = make_params({{10}, {5, 6}, {7}, {8, 8}, {3}});
  GradBuffer buf(params, 128);
  // Reverse order: sizes 12, 256, 28, 120, 40 -> {p4}, {p3}, {p2}, {p1}, {p0}? 12 + 256 > 128 -> p4 alone;
  // p3 (256 > cap) alone; 28 + 120 > 128 -> p2 alone; 120 + 40 > 128 -> p1 alone; p0 alone.
  ASSERT_EQ(buf.buckets().size(), 5u);
  EXPECT_EQ(buf.buckets()[0].params, (std::vector<size_t>{4}));
  EXPECT_EQ(buf.buckets()[1].params, (std::vector<size_t>{3}));
  EXPECT_EQ(buf.buckets()[4].params, (std::vector<size_t>{0}));
  const int64_t align = kBucketAlignBytes / 4;
  for (const auto& b : buf.buckets()) EXPECT_EQ(b.offset_numel % align, 0);
  for (size_t p = 0; p < params.size(); ++p) {
    const auto& slot = buf.slots()[p];
    EXPECT_EQ(slot.numel, params[p].tensor.numel());
    EXPECT_EQ(buf.grad_view(p).sizes(), params[p].tensor.sizes());
    const auto& range = buf.buckets()[slot.bucket];
    EXPECT_GE(slot.offset_numel, range.offset_numel);
    EXPECT_LE(slot.offset_numel + slot.numel, range.offset_numel + range.numel);
  }
  // Bigger cap: two parameters share a bucket, in reverse order, back to back.
  GradBuffer one(params, 1 << 20);
  ASSERT_EQ(one.buckets().size(), 1u);
  EXPECT_EQ(one.buckets()[0].params, (std::vector<size_t>{4, 3, 2, 1, 0}));
  EXPECT_EQ(one.slots()[3].offset_numel, one.slots()[4].offset_numel + 3);
  EXPECT_EQ(one.buckets()[0].numel, 10 + 30 + 7 + 64 + 3);
}

TEST(DistGradBuffer, AttachMakesGradAViewAndKeepsOldGradient) {
  auto params = make_params({{4}, {2, 3}});
  params[1].tensor.mutable_grad() = at::full({2, 3}, 2.5);
  GradBuffer buf(params, 1024);
  buf.attach(params);
  for (size_t p = 0; p < params.size(); ++p) EXPECT_TRUE(buf.attached(params[p], p));
  EXPECT_TRUE(params[1].tensor.grad().eq(2.5).all().item<bool>());
  EXPECT_TRUE(params[0].tensor.grad().eq(0).all().item<bool>());
  // Writes through the buffer show in .grad and the reverse.
  buf.data().fill_(1.0);
  EXPECT_TRUE(params[0].tensor.grad().eq(1).all().item<bool>());
  params[1].tensor.grad().add_(1.0);
  EXPECT_EQ(buf.data().sum().item<double>(), 4 * 1.0 + 6 * 2.0 + 0.0 * (buf.data().numel() - 10));
  buf.zero();
  EXPECT_EQ(buf.data().abs().sum().item<double>(), 0.0);
  params[0].tensor.mutable_grad() = at::Tensor();
  EXPECT_FALSE(buf.attached(params[0], 0));
}

TEST(DistGradBuffer, RejectsMixedDtypesAndNonGradParams) {
  std::vector<NamedParameter> mixed{{"a", at::zeros({2}).requires_grad_(true)},
                                    {"b", at::zeros({2}, at::kDouble).requires_grad_(true)}};
  try {
    GradBuffer buf(mixed, 100);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'b'"), std::string::npos) << e.what();
  }
  std::vector<NamedParameter> frozen{{"w", at::zeros({2})}};
  EXPECT_THROW(GradBuffer(frozen, 100), Error);
  std::vector<NamedParameter> twice{{"w", at::zeros({2}).requires_grad_(true)},
                                    {"w", at::zeros({2}).requires_grad_(true)}};
  EXPECT_THROW(GradBuffer(twice, 100), Error);
  EXPECT_THROW(GradBuffer({}, 100), Error);
  at::Tensor tied = at::zeros({2}).requires_grad_(true);
  std::vector<NamedParameter> same_tensor{{"embedding.word", tied}, {"mlm.decoder", tied}};
  try {
    GradBuffer buf(same_tensor, 100);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'embedding.word' and 'mlm.decoder' are the same tensor"), std::string::npos)
        << e.what();
  }
}

// ---- DistOptions -------------------------------------------------------------------------

TEST(DistOptions, DefaultsAndParsing) {
  DistOptions o;
  EXPECT_NO_THROW(o.validate());
  EXPECT_EQ(o.bucket_size_bytes, 25 * 1024 * 1024);
  DistOptions::fields().apply(o, {{"backend", "mpi"}, {"reduce_dtype", "bf16"}, {"bucket_size_bytes", "1024"},
                                  {"timeout_s", "2.5"}}, "test");
  EXPECT_EQ(o.backend, BackendKind::kMpi);
  EXPECT_EQ(o.reduce_dtype, ReduceDtype::kBf16);
  EXPECT_EQ(o.bucket_size_bytes, 1024);
  EXPECT_EQ(o.timeout_s, 2.5);
  const auto kv = DistOptions::fields().to_kv(o);
  EXPECT_EQ(kv.at("backend"), "mpi");
  EXPECT_EQ(kv.at("reduce_dtype"), "bf16");
}

TEST(DistOptions, ErrorsNameTheKey) {
  DistOptions o;
  try {
    DistOptions::fields().apply(o, {{"backend", "gloo"}}, "cfg.ini [dist]");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("backend"), std::string::npos) << e.what();
  }
  o.bucket_size_bytes = 0;
  try {
    o.validate();
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("dist.bucket_size_bytes"), std::string::npos) << e.what();
  }
  o = DistOptions();
  o.timeout_s = -1;
  EXPECT_THROW(o.validate(), Error);
  EXPECT_THROW(DistOptions::fields().apply(o, {{"no_such_key", "1"}}, "x"), Error);
  // The removed key grad_reduce is refused in one line that says why.
  try {
    DistOptions::fields().apply(o, {{"grad_reduce", "sum"}}, "cfg.ini [dist]");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("cfg.ini [dist]: key 'grad_reduce' is no longer read: gradients are always "
                                          "summed over ranks", 0),
              0u)
        << e.what();
  }
}

TEST(DistOptions, TheRemovedGradientScaleIsRefusedInOneLine) {
  // Any factor but 1 broke "data parallel is exact"; 1 itself is refused too (the key is gone).
  for (const char* value : {"1", "0.5"}) {
    DistOptions o;
    try {
      DistOptions::fields().apply(o, {{"grad_scale", value}}, "cfg.ini [dist]");
      FAIL() << "no error for grad_scale = " << value;
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_EQ(msg.rfind("cfg.ini [dist]: key 'grad_scale' is no longer read: the training step divides the summed "
                          "gradients by the global batch's count",
                          0),
                0u)
          << msg;
      EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    }
  }
  EXPECT_EQ(DistOptions::fields().find("grad_scale"), nullptr);
  EXPECT_EQ(DistOptions::fields().removed_keys().count("grad_scale"), 1u);
}

TEST(DistOptions, TestStallKeysAreNoConfigKeys) {
  // The stall injection is test-only: an environment variable, never a [dist] key (or --help line).
  DistOptions o;
  for (const char* key : {"test_stall_rank", "test_stall_step", "test_stall_s"})
    EXPECT_THROW(DistOptions::fields().apply(o, {{key, "1"}}, "cfg.ini [dist]"), Error) << key;
  for (const auto& f : DistOptions::fields().fields()) {
    EXPECT_EQ(f.name.find("test"), std::string::npos) << f.name;
    EXPECT_EQ(f.help.find("TEST"), std::string::npos) << f.help;
  }
}

// ---- Stall injection (TUPE_TEST_STALL) ---------------------------------------------------

TEST(DistStallInjection, ParsesRankStepSeconds) {
  const StallInjection off = parse_stall_injection("");
  EXPECT_FALSE(off.active());
  const StallInjection full = parse_stall_injection("rank=1,step=3,seconds=600");
  EXPECT_TRUE(full.active());
  EXPECT_EQ(full.rank, 1);
  EXPECT_EQ(full.step, 3);
  EXPECT_EQ(full.seconds, 600.0);
  const StallInjection any_step = parse_stall_injection("rank=0");
  EXPECT_EQ(any_step.rank, 0);
  EXPECT_EQ(any_step.step, -1);
  EXPECT_EQ(any_step.seconds, 3600.0);
  EXPECT_EQ(parse_stall_injection("seconds=0.5,rank=2").seconds, 0.5);
}

TEST(DistStallInjection, BadTextNamesTheVariable) {
  for (const char* bad : {"rank", "rank=x", "rank=1,stp=3", "step=3", "rank=-1", "rank=1,seconds=-2",
                          "rank=1,step=-5", "rank=1,", "rank=1,seconds=inf"}) {
    try {
      parse_stall_injection(bad);
      ADD_FAILURE() << "no error for '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()).rfind("TUPE_TEST_STALL: ", 0), 0u) << e.what();
    }
  }
}

TEST(DistStallInjection, ReadFromTheEnvironment) {
  ::unsetenv(kStallInjectionEnv);
  EXPECT_FALSE(stall_injection_from_env().active());
  ::setenv(kStallInjectionEnv, "rank=1,step=4", 1);
  const StallInjection s = stall_injection_from_env();
  ::unsetenv(kStallInjectionEnv);
  EXPECT_EQ(s.rank, 1);
  EXPECT_EQ(s.step, 4);
}

// ---- Watchdog ----------------------------------------------------------------------------

/// Records abort messages and lets a test wait for the first one (bounded wait).
struct AbortRecorder {
  std::mutex mutex;
  std::condition_variable cv;
  std::vector<std::string> messages;
  Watchdog::AbortFn fn() {
    return [this](const std::string& m) {
      std::lock_guard<std::mutex> lk(mutex);
      messages.push_back(m);
      cv.notify_all();
    };
  }
  bool wait_for_one(std::chrono::seconds limit) {
    std::unique_lock<std::mutex> lk(mutex);
    return cv.wait_for(lk, limit, [this] { return !messages.empty(); });
  }
};

TEST(DistWatchdog, ReportsAHungCollectiveWithRankStepAndName) {
  AbortRecorder rec;
  Watchdog wd(3, 0.05, rec.fn(), std::chrono::milliseconds(5));
  wd.start("all_reduce grad bucket 2/5", 17, [] { return false; });
  ASSERT_TRUE(rec.wait_for_one(std::chrono::seconds(30)));
  const std::string m = rec.messages.front();
  EXPECT_NE(m.find("rank 3"), std::string::npos) << m;
  EXPECT_NE(m.find("step 17"), std::string::npos) << m;
  EXPECT_NE(m.find("'all_reduce grad bucket 2/5'"), std::string::npos) << m;
  EXPECT_EQ(wd.fired(), 1);
}

TEST(DistWatchdog, FinishedOrCompletedCollectivesDoNotFire) {
  AbortRecorder rec;
  {
    Watchdog wd(0, 0.05, rec.fn(), std::chrono::milliseconds(5));
    const uint64_t a = wd.start("finished before deadline", 1, [] { return false; });
    wd.finish(a);
    wd.finish(a);  // twice is fine
    std::atomic<int> probes{0};
    wd.start("completed, wait() not called yet", 1, [&probes] {
      ++probes;
      return true;
    });
    // Wait until the probe ran (past the deadline) and the entry was dropped.
    for (int i = 0; i < 3000 && wd.in_flight() > 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    EXPECT_EQ(wd.in_flight(), 0u);
    EXPECT_GE(probes.load(), 1);
  }
  EXPECT_TRUE(rec.messages.empty());
}

TEST(DistWatchdog, AProbeThatThrowsEndsTheJobWithItsErrorNotAsAHang) {
  // What the NCCL probe does on a sticky CUDA error (dist/nccl_communicator.cpp): it throws.
  // The deadline is a minute away: the report must come at the next poll, naming the error.
  AbortRecorder rec;
  Watchdog wd(1, 60.0, rec.fn(), std::chrono::milliseconds(5));
  const auto start = std::chrono::steady_clock::now();
  wd.start("all_reduce grad bucket 0/3", 4, [] { return false; });
  wd.start("all_reduce step count", 4, []() -> bool {
    throw Error("nccl backend: rank 1: cuda:0: cudaEventQuery failed: cudaErrorIllegalAddress: an illegal memory access");
  });
  ASSERT_TRUE(rec.wait_for_one(std::chrono::seconds(20)));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 20.0);
  const std::string m = rec.messages.front();
  EXPECT_NE(m.find("rank 1: collective 'all_reduce step count' at step 4 failed: "), std::string::npos) << m;
  EXPECT_NE(m.find("cudaErrorIllegalAddress"), std::string::npos) << m;
  EXPECT_EQ(m.find("did not finish"), std::string::npos) << m;
  EXPECT_EQ(wd.fired(), 1);
  EXPECT_EQ(wd.in_flight(), 1u);  // the failed entry is dropped once reported; the other is still in flight
}

TEST(DistWatchdog, RejectsNonPositiveTimeout) {
  AbortRecorder rec;
  EXPECT_THROW(Watchdog(0, 0.0, rec.fn()), Error);
}

// ---- Device plan (dist/device.h) ------------------------------------------------------------

/// The records `nodes` nodes of `ranks_per_node` ranks would gather when each process
/// sees `visible` GPUs: `per_task_gpus` means each rank sees only its own one (srun
/// --gpus-per-task=1: distinct UUIDs at index 0), otherwise all ranks of a node see the
/// same `visible` GPUs and take local_rank mod visible.
std::vector<RankDevice> cluster(int nodes, int ranks_per_node, int visible, bool per_task_gpus, bool use_cuda = true) {
  std::vector<RankDevice> out;
  for (int n = 0; n < nodes; ++n)
    for (int l = 0; l < ranks_per_node; ++l) {
      RankDevice d;
      d.rank = n * ranks_per_node + l;
      d.host = "node-" + std::to_string(n);
      d.local_rank = l;
      d.local_world_size = ranks_per_node;
      d.visible_devices = visible;
      d.use_cuda = use_cuda && visible > 0;
      if (d.use_cuda) {
        d.device_index = cuda_device_for_local_rank(l, visible);
        const int physical = per_task_gpus ? l : d.device_index;
        d.gpu_uuid = "GPU-" + d.host + "-" + std::to_string(physical);
      }
      out.push_back(d);
    }
  return out;
}

TEST(DistDevicePlan, LocalRankModuloVisibleDevices) {
  EXPECT_EQ(cuda_device_for_local_rank(0, 8), 0);
  EXPECT_EQ(cuda_device_for_local_rank(7, 8), 7);
  EXPECT_EQ(cuda_device_for_local_rank(5, 1), 0);   // srun --gpus-per-task=1: its one GPU
  EXPECT_EQ(cuda_device_for_local_rank(9, 4), 1);
  EXPECT_THROW(cuda_device_for_local_rank(0, 0), Error);
  EXPECT_THROW(cuda_device_for_local_rank(-1, 2), Error);
}

TEST(DistDevicePlan, PlacementLineNamesEachNodesRanks) {
  EXPECT_EQ(placement_line(cluster(2, 2, 0, false, false)),
            "placement: node-0 ranks 0-1; node-1 ranks 2-3 (4 ranks on 2 nodes)");
  // Round-robin placement: runs are split; hosts in order of their lowest rank.
  std::vector<RankDevice> rr = cluster(1, 5, 0, false, false);
  for (RankDevice& d : rr) d.host = d.rank % 2 ? "b" : "a";
  EXPECT_EQ(placement_line(rr), "placement: a ranks 0,2,4; b ranks 1,3 (5 ranks on 2 nodes)");
  std::vector<RankDevice> one = cluster(1, 1, 0, false, false);
  EXPECT_EQ(placement_line(one), "placement: node-0 ranks 0 (1 rank on 1 node)");
}

TEST(DistDevicePlan, SoundLayoutsPass) {
  // mpirun, 2 nodes x 8 GPUs, every process sees all 8.
  EXPECT_EQ(check_device_plan(cluster(2, 8, 8, false), DeviceRequest::kCuda, "train.device"), "");
  // srun --gpus-per-task=1: 8 ranks per node, each sees one GPU (its own).
  EXPECT_EQ(check_device_plan(cluster(2, 8, 1, true), DeviceRequest::kAuto, "train.device"), "");
  // Fewer ranks than GPUs is fine (some GPUs idle).
  EXPECT_EQ(check_device_plan(cluster(1, 2, 8, false), DeviceRequest::kAuto, "train.device"), "");
  // CPU-only job: auto on machines without GPUs, or cpu requested anywhere.
  EXPECT_EQ(check_device_plan(cluster(2, 3, 0, false), DeviceRequest::kAuto, "train.device"), "");
  EXPECT_EQ(check_device_plan(cluster(1, 4, 8, false, false), DeviceRequest::kCpu, "train.device"), "");
}

TEST(DistDevicePlan, RanksSharingAGpuByAccidentAreRefused) {
  // 8 ranks on a node whose processes all see the same 4 GPUs: ranks 0 and 4 on cuda:0.
  const std::string e = check_device_plan(cluster(1, 8, 4, false), DeviceRequest::kCuda, "train.device");
  EXPECT_NE(e.find("train.device: ranks 0 and 4 on host node-0 would share one GPU"), std::string::npos) << e;
  EXPECT_NE(e.find("8 ranks on this node but 4 GPU(s) visible"), std::string::npos) << e;
  EXPECT_EQ(e.find('\n'), std::string::npos);
  // The same on the second node of two is named with its host and ranks.
  auto two = cluster(2, 2, 2, false);
  two[3].device_index = 0;  // rank 3 (node-1, local 1) on its node's GPU 0, like rank 2
  two[3].gpu_uuid = two[2].gpu_uuid;
  const std::string e2 = check_device_plan(two, DeviceRequest::kAuto, "finetune.device");
  EXPECT_NE(e2.find("finetune.device: ranks 2 and 3 on host node-1"), std::string::npos) << e2;
  // Without UUIDs the device index decides.
  auto no_uuid = cluster(1, 3, 2, false);
  for (auto& r : no_uuid) r.gpu_uuid.clear();
  EXPECT_NE(check_device_plan(no_uuid, DeviceRequest::kCuda, "k").find("ranks 0 and 2"), std::string::npos);
}

TEST(DistDevicePlan, MissingOrMixedDevicesAreRefused) {
  auto ranks = cluster(2, 2, 1, true);
  ranks[3].visible_devices = 0;  // node-1's second rank sees no GPU
  ranks[3].use_cuda = false;
  ranks[3].device_index = -1;
  const std::string cuda = check_device_plan(ranks, DeviceRequest::kCuda, "train.device");
  EXPECT_NE(cuda.find("train.device: cuda requested, but rank 3 (host node-1) sees no CUDA device"), std::string::npos)
      << cuda;
  const std::string mixed = check_device_plan(ranks, DeviceRequest::kAuto, "train.device");
  EXPECT_NE(mixed.find("train.device: ranks disagree on the device: rank 0"), std::string::npos) << mixed;
  EXPECT_NE(mixed.find("rank 3 (host node-1, 0 visible) on the CPU"), std::string::npos) << mixed;
}

TEST(DistDevicePlan, RequestParsing) {
  EXPECT_EQ(parse_device_request("auto", "k"), DeviceRequest::kAuto);
  EXPECT_EQ(parse_device_request("cpu", "k"), DeviceRequest::kCpu);
  EXPECT_EQ(parse_device_request("cuda", "k"), DeviceRequest::kCuda);
  try {
    parse_device_request("gpu", "train.device");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "train.device: expected auto, cpu or cuda, got 'gpu'");
  }
}

}  // namespace
}  // namespace tupe::dist
