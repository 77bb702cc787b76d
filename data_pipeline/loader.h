// The pre-training loader: background prefetch of masked batches in the global order
// (sampler.h), and the evaluation iterator over a validation split.
//
// Loader: step k after the start state is built by any of data.num_threads threads, at most
// data.prefetch_batches ahead of the consumer, and handed out strictly in order; its contents
// are a pure function of (seed, epoch, positions), so neither the thread count nor the world
// size changes any batch. state() is exact: the position after the last batch handed out.
// Each rank makes its own Loader with its rank and the world size (plain ints, no MPI here).
#pragma once
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "data_pipeline/batch.h"
#include "data_pipeline/sampler.h"

namespace tupe::data_pipeline {

class Loader {
 public:
  /// Starts the worker threads at `start` (any position of any earlier run, whatever its
  /// world size). Throws tupe::Error for a bad config, rank/world size, a global batch not
  /// divisible by the world size, or a dataset smaller than one global batch.
  /// `on_thread_start` (may be empty) runs first in every worker thread: the trainer makes
  /// its CUDA device current there, so that pinned-memory allocations do not open a
  /// context on device 0. `words`: the vocabulary's word boundaries, needed by
  /// data.mask_strategy = whole_word and span (BatchBuilder).
  Loader(std::shared_ptr<const PretrainDataset> dataset, const DataOptions& config, int64_t rank, int64_t world_size,
         LoaderState start = {}, std::function<void()> on_thread_start = {},
         std::shared_ptr<const WordBoundaries> words = nullptr);
  ~Loader();
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  /// This rank's batch of the next step (B / W rows). Rethrows a worker's tupe::Error.
  MlmBatch next();
  /// Position after the last batch returned by next() (normalised: an exhausted epoch
  /// reads as (epoch + 1, 0)). Save it in checkpoints; pass it back as `start`.
  LoaderState state() const;
  /// Seconds next() has spent so far waiting for batches: blocked until a worker handed the
  /// next one over, or (num_threads 0) building it. The trainer reports its share of each log
  /// window's time (metrics "data_wait_fraction"). Thread-safe.
  double wait_seconds() const;
  /// floor(N / B), the same for every world size.
  int64_t steps_per_epoch() const { return sampler_.steps_per_epoch(); }
  /// B / W.
  int64_t local_batch_size() const { return sampler_.global_batch_size() / world_size_; }

 private:
  struct Slot {
    MlmBatch batch;
    std::exception_ptr error;
  };
  /// Builds the batch of step `task` (counted from the start state); pure.
  MlmBatch build(int64_t task, BatchWorkspace& ws) const;
  void worker();

  GlobalSampler sampler_;
  BatchBuilder builder_;
  int64_t rank_, world_size_, prefetch_;
  std::pair<int64_t, int64_t> rows_;  // this rank's rows of each global batch
  LoaderState start_;

  mutable std::mutex mutex_;
  std::condition_variable work_cv_, ready_cv_;
  int64_t next_task_ = 0;  // next step a worker takes
  int64_t handed_ = 0;     // steps handed out by next()
  std::map<int64_t, Slot> ready_;
  bool stop_ = false;
  BatchWorkspace sync_ws_;  // used when num_threads == 0
  double wait_seconds_ = 0;  // guarded by mutex_
  std::vector<std::thread> threads_;
};

/// Iterates a validation dataset once in its natural order with fixed masks (keyed by
/// data.validation_seed, epoch 0: the same every time). Step t covers samples
/// [t*B, min((t+1)*B, N)) (the last step may be short: nothing is dropped); rank r of W gets
/// rows [floor(r*n_t/W), floor((r+1)*n_t/W)) of it, possibly none (a batch of 0 rows).
class EvalIterator {
 public:
  /// `words` as for Loader. Throws tupe::Error as BatchBuilder, or for an empty dataset.
  EvalIterator(std::shared_ptr<const PretrainDataset> dataset, const DataOptions& config, int64_t rank,
               int64_t world_size, std::shared_ptr<const WordBoundaries> words = nullptr);
  /// This rank's part of the next step, or nullopt after the last step.
  std::optional<MlmBatch> next();
  /// ceil(N / B).
  int64_t num_steps() const;
  /// Back to the first step.
  void reset() { step_ = 0; }

 private:
  BatchBuilder builder_;
  int64_t batch_, rank_, world_size_;
  int64_t step_ = 0;
  BatchWorkspace ws_;
  std::vector<int64_t> indices_;
};

}  // namespace tupe::data_pipeline
