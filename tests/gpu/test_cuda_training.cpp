// Training pieces on CUDA: gradient synchronisation through NCCL at world size 1 equals
// plain autograd accumulation, and a checkpoint moves between GPU and CPU with bitwise-equal
// weights and optimizer state (the CheckpointStore + copy_named_tensors + load_state_dict
// path that `tupe pretrain --resume` takes).
#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>

#include "checkpoint/checkpoint_store.h"
#include "checkpoint/named_tensors.h"
#include "dist/context.h"
#include "dist/ddp.h"
#include "dist/device.h"
#include "model/tupe_bert.h"
#include "tests/gpu/gpu_test_util.h"
#include "trainer/optimizer.h"

namespace tupe::gputest {
namespace {

namespace fs = std::filesystem;
using model::PositionEncoding;

at::Tensor mlm_loss(model::TupeBertImpl& net, const MlmBatch& cpu_batch, const at::Device& device) {
  const MlmBatch b = cpu_batch.to(device);
  const at::Tensor logits = net.mlm_logits(b.input_ids, b.attention_mask, b.segment_ids, b.masked_positions);
  return at::cross_entropy_loss(logits, b.masked_labels, {}, at::Reduction::Sum);
}

void copy_parameters(model::TupeBertImpl& from, model::TupeBertImpl& to) {
  at::NoGradGuard no_grad;
  auto src = from.named_parameters();
  for (auto& p : to.named_parameters()) p.value().copy_(src[p.key()]);
}

/// Deterministic kernels where CUDA has them (scatter/index_put backward), so that two runs
/// of the same computation can be compared exactly.
class DeterministicScope {
 public:
  DeterministicScope() : saved_(at::globalContext().deterministicAlgorithms()) {
    at::globalContext().setDeterministicAlgorithms(true, /*warn_only=*/true);
  }
  ~DeterministicScope() { at::globalContext().setDeterministicAlgorithms(saved_, false); }

 private:
  bool saved_;
};

TEST(CudaDdp, WorldSizeOneEqualsPlainAccumulation) {
  TUPE_REQUIRE_CUDA();
  DeterministicScope deterministic;
  const at::Device device = dist::resolve_device(env(), dist::DeviceRequest::kCuda, "test device");
  dist::DistOptions options;
  options.bucket_size_bytes = 64 * 1024;  // several buckets for a small model
  options.timeout_s = 60;
  dist::DistContext context(env(), options, device);
  ASSERT_STREQ(context.comm().backend_name(), "nccl");

  const auto config = small_config(PositionEncoding::kTupeRelative, true);
  at::manual_seed(3);
  model::TupeBert plain(config), wrapped(config);
  copy_parameters(*plain, *wrapped);
  plain->to(device);
  wrapped->to(device);
  const MlmBatch first = make_batch(21), second = make_batch(22);

  // Plain autograd: two backward passes accumulate into .grad.
  mlm_loss(*plain, first, device).backward();
  mlm_loss(*plain, second, device).backward();

  // DDP: the same two micro-steps, the second one synchronised (NCCL, world size 1).
  std::vector<dist::NamedParameter> params;
  for (auto& p : wrapped->named_parameters()) params.push_back({p.key(), p.value()});
  dist::DistributedDataParallel ddp(context.comm(), params, options);
  ASSERT_GT(ddp.num_buckets(), 1u);
  ddp.begin_step();
  ddp.prepare_for_backward(false);
  mlm_loss(*wrapped, first, device).backward();
  ddp.prepare_for_backward(true);
  mlm_loss(*wrapped, second, device).backward();
  ddp.finish_grad_sync();
  EXPECT_EQ(ddp.buckets_launched(), static_cast<int64_t>(ddp.num_buckets()));

  auto reference = plain->named_parameters();
  int64_t bitwise = 0, total = 0;
  double worst = 0;
  for (const auto& p : params) {
    const at::Tensor a = p.tensor.grad().cpu(), b = reference[p.name].grad().cpu();
    bitwise += at::equal(a, b) ? 1 : 0;
    ++total;
    worst = std::max(worst, relative_error(a, b, 1e-6));
  }
  std::printf("DDP (NCCL, W=1) vs plain accumulation: %lld of %lld gradients bitwise equal, worst relative %.2e\n",
              static_cast<long long>(bitwise), static_cast<long long>(total), worst);
  EXPECT_LE(worst, 1e-6);
}

/// Two AdamW steps of a tiny TUPE-R on `device`; returns the model and its optimizer.
std::pair<model::TupeBert, std::unique_ptr<trainer::Optimizer>> trained(const at::Device& device) {
  const auto config = small_config(PositionEncoding::kTupeRelative, true);
  at::manual_seed(5);
  model::TupeBert net(config);
  net->to(device);
  checkpoint::NamedTensors named;
  for (auto& p : net->named_parameters()) named.emplace_back(p.key(), p.value());
  trainer::OptimizerOptions options;
  auto optimizer = trainer::make_optimizer(named, options);
  for (uint64_t step = 0; step < 2; ++step) {
    optimizer->zero_grad();
    mlm_loss(*net, make_batch(30 + step), device).backward();
    optimizer->step(1e-3);
  }
  return {net, std::move(optimizer)};
}

fs::path fresh_dir(const std::string& name) {
  const auto stamp = std::chrono::steady_clock::now().time_since_epoch().count();
  const fs::path dir = fs::temp_directory_path() / ("tupe-gpu-test-" + name + "-" + std::to_string(stamp));
  fs::remove_all(dir);
  return dir;
}

void check_checkpoint_moves(const at::Device& from, const at::Device& to) {
  auto [source, source_optimizer] = trained(from);
  checkpoint::CheckpointContents contents;
  for (auto& p : source->named_parameters()) contents.model.emplace_back(p.key(), p.value().detach());
  contents.optimizer = source_optimizer->state_dict();
  contents.state.step = 2;
  contents.state.scheduler_step = 2;
  checkpoint::CheckpointOptions options;
  options.dir = fresh_dir(from.str() + "-to-" + to.str()).string();
  options.keep_last = 0;
  options.keep_every = 0;
  checkpoint::CheckpointStore store(options);
  const fs::path saved = store.save(contents);

  // The resume path: load (hash-checked), copy into a model on the other device, restore
  // the optimizer state there.
  checkpoint::CheckpointContents loaded = checkpoint::CheckpointStore::load(saved);
  model::TupeBert target(source->config);
  target->to(to);
  checkpoint::NamedTensors named;
  for (auto& p : target->named_parameters()) named.emplace_back(p.key(), p.value());
  checkpoint::copy_named_tensors(named, loaded.model, (saved / "model.safetensors").string());
  auto target_optimizer = trainer::make_optimizer(named, trainer::OptimizerOptions{});
  target_optimizer->load_state_dict(loaded.optimizer);

  auto reference = source->named_parameters();
  for (const auto& [name, t] : named) {
    EXPECT_EQ(t.device().type(), to.type());
    EXPECT_TRUE(at::equal(t.cpu(), reference[name].cpu())) << from << " -> " << to << ": weight " << name;
  }
  const auto a = source_optimizer->state_dict(), b = target_optimizer->state_dict();
  ASSERT_EQ(a.tensors.size(), b.tensors.size());
  for (size_t i = 0; i < a.tensors.size(); ++i) {
    EXPECT_EQ(a.tensors[i].first, b.tensors[i].first);
    EXPECT_TRUE(at::equal(a.tensors[i].second.cpu(), b.tensors[i].second.cpu()))
        << from << " -> " << to << ": optimizer tensor " << a.tensors[i].first;
  }
  fs::remove_all(options.dir);
}

TEST(CudaCheckpoint, SavedOnGpuResumesOnCpuBitwise) {
  TUPE_REQUIRE_CUDA();
  check_checkpoint_moves(at::Device(at::kCUDA, 0), at::Device(at::kCPU));
}

TEST(CudaCheckpoint, SavedOnCpuResumesOnGpuBitwise) {
  TUPE_REQUIRE_CUDA();
  check_checkpoint_moves(at::Device(at::kCPU), at::Device(at::kCUDA, 0));
}

}  // namespace
}  // namespace tupe::gputest
