#include "trainer/pretrain/train_options.h"

namespace tupe::pretrain {

void TrainOptions::validate() const {
  TUPE_CHECK(micro_batch_size >= 0, "train.micro_batch_size: must be >= 0 (0 = derive), got " << micro_batch_size);
  TUPE_CHECK(max_micro_batch_size > 0, "train.max_micro_batch_size: must be positive, got " << max_micro_batch_size);
  TUPE_CHECK(max_steps >= 0, "train.max_steps: must be >= 0, got " << max_steps);
  TUPE_CHECK(log_every > 0, "train.log_every: must be positive, got " << log_every);
  TUPE_CHECK(eval_every >= 0, "train.eval_every: must be >= 0, got " << eval_every);
  TUPE_CHECK(eval_batches >= 0, "train.eval_batches: must be >= 0, got " << eval_batches);
  TUPE_CHECK(threads >= 0, "train.threads: must be >= 0, got " << threads);
  TUPE_CHECK(peak_tflops >= 0, "train.peak_tflops: must be >= 0 (0 = auto), got " << peak_tflops);
}

const FieldTable<TrainOptions>& TrainOptions::fields() {
  static const FieldTable<TrainOptions> table = [] {
    FieldTable<TrainOptions> t;
    t.integer("micro_batch_size", &TrainOptions::micro_batch_size,
              "sequences per rank per forward/backward (gradient accumulation = global batch / (W x this)); 0 = "
              "the largest divisor of the per-rank batch up to max_micro_batch_size")
        .integer("max_micro_batch_size", &TrainOptions::max_micro_batch_size,
                 "largest micro-batch (sequences) when micro_batch_size = 0 derives it")
        .integer("max_steps", &TrainOptions::max_steps, "stop after this optimizer step; 0 = optimizer.total_steps")
        .integer("log_every", &TrainOptions::log_every, "progress and metrics every this many steps")
        .integer("eval_every", &TrainOptions::eval_every, "validation loss every this many steps; 0 = at the end only")
        .integer("eval_batches", &TrainOptions::eval_batches, "validation global batches per evaluation; 0 = all")
        .integer("seed", &TrainOptions::seed, "seed of the model init and of the per-step dropout RNG")
        .custom(
            "device", "auto | cpu | cuda (GPU: local rank mod visible GPUs)",
            [](const TrainOptions& o) { return dist::to_string(o.device); },
            [](TrainOptions& o, const std::string& v) { o.device = dist::parse_device_request(v, "key 'device'"); })
        .integer("threads", &TrainOptions::threads, "intra-op CPU threads per rank; 0 = LibTorch default")
        .path("metrics_dir", &TrainOptions::metrics_dir,
              "folder of per-rank metrics JSONL; \"\" = <checkpoint.dir>/metrics")
        .real("peak_tflops", &TrainOptions::peak_tflops,
              "peak TFLOP/s for the MFU figure; 0 = auto (GPU datasheet table by name and precision; CPU: measured)")
        .boolean("tf32", &TrainOptions::tf32, "TF32 tensor cores for fp32 matmuls on CUDA")
        .boolean("progress", &TrainOptions::progress, "rank 0 progress line")
        .text("vocab_sha256", &TrainOptions::vocab_sha256,
              "expected SHA-256 (hex) of the shards' vocabulary; \"\" = take the shards'");
    return t;
  }();
  return table;
}

}  // namespace tupe::pretrain
