#include "trainer/pretrain/train_options.h"

#include "common/error.h"

namespace tupe::pretrain {

void TrainOptions::validate() const {
  fields().check(*this);
  const bool hex64 = init_from_sha256.size() == 64 &&
                     init_from_sha256.find_first_not_of("0123456789abcdef") == std::string::npos;
  TUPE_CHECK(init_from_sha256.empty() || hex64,
             "train.init_from_sha256: '" << init_from_sha256 << "' is not a SHA-256 (64 lower-case hex digits)");
  TUPE_CHECK(init_from_sha256.empty() || !init_from.empty(),
             "train.init_from_sha256: set, but train.init_from is not (nothing to check it against)");
  profile_step_range(profile_steps);
}

std::optional<ProfileStepRange> profile_step_range(const std::string& text) {
  if (text.empty() || text == "off") return std::nullopt;
  const auto number = [&](const std::string& part, const char* which) {
    TUPE_CHECK(!part.empty() && part.size() <= 18 &&
                   part.find_first_not_of("0123456789") == std::string::npos,
               "train.profile_steps: '" << text << "': " << which
                                        << " is not a step number (want A:B, optimizer steps A to B, e.g. 20:24)");
    return static_cast<int64_t>(std::stoll(part));
  };
  const size_t colon = text.find(':');
  TUPE_CHECK(colon != std::string::npos,
             "train.profile_steps: '" << text << "' is not A:B (optimizer steps A to B, e.g. 20:24; \"\" = off)");
  const ProfileStepRange r{number(text.substr(0, colon), "A"), number(text.substr(colon + 1), "B")};
  TUPE_CHECK(r.first >= 1, "train.profile_steps: '" << text << "': steps count from 1");
  TUPE_CHECK(r.last >= r.first, "train.profile_steps: '" << text << "': B (" << r.last << ") is before A (" << r.first
                                                         << ")");
  return r;
}

const FieldTable<TrainOptions>& TrainOptions::fields() {
  using T = TrainOptions;
  static const FieldTable<T> table = [] {
    FieldTable<T> t("train");
    t.integer("micro_batch_size", &T::micro_batch_size, 32, "sequences",
              "per rank per forward/backward (gradient accumulation = global batch / (W x this)); 0 = the largest "
              "divisor of the per-rank batch up to max_micro_batch_size (trainer/pretrain/batch_plan.h)")
        .at_least(0)
        .integer("max_micro_batch_size", &T::max_micro_batch_size, 32, "sequences",
                 "largest micro-batch when micro_batch_size = 0 derives it (the memory bound)")
        .positive()
        .integer("max_steps", &T::max_steps, 0, "optimizer steps", "stop after this step; 0 = optimizer.total_steps")
        .at_least(0)
        .integer("log_every", &T::log_every, 10, "optimizer steps", "progress line and metrics record every this many")
        .positive()
        .integer("eval_every", &T::eval_every, 1000, "optimizer steps",
                 "validation MLM loss every this many; 0 = only at the end")
        .at_least(0)
        .integer("eval_batches", &T::eval_batches, 0, "global batches",
                 "validation batches per evaluation; 0 = the whole split")
        .at_least(0)
        .integer("seed", &T::seed, 1, "",
                 "seed of the model init (rank 0's weights are broadcast) and of the per-step dropout seeds")
        .choice("device", &T::device, dist::kDeviceRequestWords, dist::DeviceRequest::kAuto,
                "cuda:<local rank mod visible GPUs> when a GPU is visible (auto), the CPU, or a GPU (dist/device.h)")
        .integer("threads", &T::threads, 0, "", "intra-op CPU threads per rank; 0 = LibTorch's default")
        .at_least(0)
        .path("metrics_dir", &T::metrics_dir, "", "folder of the per-rank metrics JSONL; \"\" = <checkpoint.dir>/metrics")
        .real("peak_tflops", &T::peak_tflops, 0, "TFLOP/s",
              "peak for the MFU figure; 0 = auto (GPU: datasheet table by name and precision, trainer/pretrain/flops.h; "
              "CPU: the measured fp32 matmul rate)")
        .at_least(0)
        .boolean("tf32", &T::tf32, true, "TF32 tensor cores for fp32 matmuls on CUDA (no effect on the CPU)")
        .boolean("progress", &T::progress, true, "rank 0's progress line (rewritten in place on a terminal)")
        .boolean("tensorboard", &T::tensorboard, true,
                 "rank 0 writes TensorBoard scalars (the metrics records) under <checkpoint.dir>/tensorboard")
        .text("vocab_sha256", &T::vocab_sha256, "", "expected SHA-256 (hex) of the shards' vocabulary; \"\" = the shards'")
        .path("init_from", &T::init_from, "",
              "start from these weights (--init-from): a tupe checkpoint (a step_<N> folder, or a run folder: its "
              "newest whole one) or a Hugging Face BERT folder; a new run at step 0 with the source's model shape "
              "(docs/warm-start.md); \"\" = from scratch")
        .text("init_from_sha256", &T::init_from_sha256, "",
              "expected SHA-256 (hex) of init_from's model.safetensors; \"\" = whatever it holds (the run records "
              "the value)")
        .text("profile_steps", &T::profile_steps, "",
              "A:B = every rank writes a Chrome/Perfetto trace of optimizer steps A to B (LibTorch's profiler) "
              "to <checkpoint.dir>/traces/rank<R>-steps<A>-<B>.json (docs/profiling.md); \"\" = off");
    return t;
  }();
  return table;
}

}  // namespace tupe::pretrain
