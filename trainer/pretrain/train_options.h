// Options of the pre-training loop ([train] section).
#pragma once
#include <cstdint>
#include <string>

#include "common/config_fields.h"
#include "dist/device.h"

namespace tupe::pretrain {

struct TrainOptions {
  int64_t micro_batch_size = 32;      ///< sequences per rank per forward/backward; 0 = derive it
                                      ///< (trainer/pretrain/batch_plan.h); accumulation = B / (W x this)
  int64_t max_micro_batch_size = 32;  ///< cap of a derived micro-batch (sequences; memory bound)
  int64_t max_steps = 0;              ///< stop after this optimizer step (0 = optimizer.total_steps)
  int64_t log_every = 10;             ///< progress line and metrics record every this many steps
  int64_t eval_every = 1000;          ///< validation MLM loss every this many steps (0 = only at the end)
  int64_t eval_batches = 0;           ///< validation global batches per evaluation (0 = the whole split)
  int64_t seed = 1;                   ///< model init (rank 0's weights are broadcast) and per-step dropout seeds
  dist::DeviceRequest device =
      dist::DeviceRequest::kAuto;  ///< auto | cpu | cuda (dist/device.h: cuda:<local rank mod visible GPUs>)
  int64_t threads = 0;             ///< intra-op CPU threads per rank (0 = LibTorch's default)
  std::string metrics_dir;         ///< per-rank JSONL metrics; "" = <checkpoint.dir>/metrics
  double peak_tflops = 0;          ///< peak TFLOP/s for MFU; 0 = auto (GPU: datasheet table by name and
                                   ///< precision, trainer/pretrain/flops.h; CPU: measured fp32 matmul rate)
  bool tf32 = true;                ///< TF32 tensor cores for fp32 matmuls on CUDA (no effect on the CPU)
  bool progress = true;            ///< rank 0 progress line (rewritten in place on a terminal)
  std::string vocab_sha256;        ///< expected vocabulary SHA-256 of the shards; "" = take the shards'

  /// Throws tupe::Error "train.<key>: <cause>".
  void validate() const;
  static const FieldTable<TrainOptions>& fields();
};

}  // namespace tupe::pretrain
