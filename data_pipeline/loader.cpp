#include "data_pipeline/loader.h"

#include <chrono>

#include "common/error.h"
#include "common/log.h"

namespace tupe::data_pipeline {

namespace {

void check_rank(int64_t rank, int64_t world_size) {
  TUPE_CHECK(world_size >= 1 && rank >= 0 && rank < world_size,
             "data: rank " << rank << " outside world size " << world_size);
}

}  // namespace

Loader::Loader(std::shared_ptr<const PretrainDataset> dataset, const DataOptions& config, int64_t rank,
               int64_t world_size, LoaderState start, std::function<void()> on_thread_start,
               std::shared_ptr<const WordBoundaries> words)
    : sampler_(dataset->size(), config.global_batch_size, static_cast<uint64_t>(config.seed)),
      builder_(dataset, config, static_cast<uint64_t>(config.seed), std::move(words)),
      rank_(rank),
      world_size_(world_size),
      prefetch_(config.prefetch_batches) {
  rows_ = sampler_.rank_rows(rank, world_size);
  start_ = sampler_.normalize(start);
  for (int64_t t = 0; t < config.num_threads; ++t)
    threads_.emplace_back([this, on_thread_start] {
      try {
        if (on_thread_start) on_thread_start();
      } catch (const std::exception& e) {  // a worker thread must not end the process
        log::warn(std::string("loader thread: start-up hook failed: ") + e.what());
      }
      worker();
    });
}

Loader::~Loader() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  work_cv_.notify_all();
  for (auto& t : threads_) t.join();
}

MlmBatch Loader::build(int64_t task, BatchWorkspace& ws) const {
  const LoaderState s = sampler_.advance(start_, task);
  std::vector<int64_t> step_indices;
  sampler_.step_indices(s, step_indices);  // the whole global batch: all ranks pad alike
  MlmBatch b = builder_.build(s.epoch, step_indices, rows_.first, rows_.second, ws);
  b.first_position = s.consumed_samples;
  return b;
}

void Loader::worker() {
  BatchWorkspace ws;
  for (;;) {
    int64_t task;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      work_cv_.wait(lock, [this] { return stop_ || next_task_ < handed_ + prefetch_; });
      if (stop_) return;
      task = next_task_++;
    }
    Slot slot;
    try {
      slot.batch = build(task, ws);
    } catch (...) {
      slot.error = std::current_exception();
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ready_.emplace(task, std::move(slot));
    }
    ready_cv_.notify_all();
  }
}

MlmBatch Loader::next() {
  const auto t0 = std::chrono::steady_clock::now();
  const auto since_t0 = [&t0] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  if (threads_.empty()) {
    MlmBatch b = build(handed_, sync_ws_);
    std::lock_guard<std::mutex> lock(mutex_);
    ++handed_;
    wait_seconds_ += since_t0();
    return b;
  }
  MlmBatch batch;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    ready_cv_.wait(lock, [this] { return ready_.count(handed_) > 0; });
    wait_seconds_ += since_t0();
    auto it = ready_.find(handed_);
    // A failed step stays in place (not consumed): every later call rethrows its error.
    if (it->second.error) std::rethrow_exception(it->second.error);
    batch = std::move(it->second.batch);
    ready_.erase(it);
    ++handed_;
  }
  work_cv_.notify_all();
  return batch;
}

double Loader::wait_seconds() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return wait_seconds_;
}

LoaderState Loader::state() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return sampler_.advance(start_, handed_);
}

EvalIterator::EvalIterator(std::shared_ptr<const PretrainDataset> dataset, const DataOptions& config, int64_t rank,
                           int64_t world_size, std::shared_ptr<const WordBoundaries> words)
    : builder_(dataset, config, static_cast<uint64_t>(config.validation_seed), std::move(words)),
      batch_(config.global_batch_size),
      rank_(rank),
      world_size_(world_size) {
  check_rank(rank, world_size);
  TUPE_CHECK(dataset->size() > 0, "data: the validation dataset is empty");
}

int64_t EvalIterator::num_steps() const {
  return (builder_.dataset().size() + batch_ - 1) / batch_;
}

std::optional<MlmBatch> EvalIterator::next() {
  if (step_ >= num_steps()) return std::nullopt;
  const int64_t first = step_ * batch_;
  const int64_t rows = std::min(batch_, builder_.dataset().size() - first);
  indices_.resize(static_cast<size_t>(rows));
  for (int64_t k = 0; k < rows; ++k) indices_[static_cast<size_t>(k)] = first + k;
  const int64_t begin = rank_ * rows / world_size_, end = (rank_ + 1) * rows / world_size_;
  MlmBatch b = builder_.build(0, indices_, begin, end, ws_);
  b.first_position = first;
  ++step_;
  return b;
}

}  // namespace tupe::data_pipeline
