// Options of fine-tuning and evaluation ([finetune] section), with the paper's protocol as
// the defaults (docs/model.md "The paper's settings"): LR grid {2e-5, 3e-5, 4e-5, 5e-5} x 5
// seeds, the median over seeds per LR, the best LR reported; batch 32; 10 epochs (5 for MNLI,
// QNLI, QQP); 6% linear warm-up then linear decay to 0; Adam (0.9, 0.999), eps 1e-6, weight
// decay 0.01; clip 1.0; dropout 0.1; max length 512 (the model's max_positions). The "shrink"
// options (train_rows, epochs, seeds, learning_rates, max_length) make quick runs. Every
// field -- its meaning, unit, default and range -- is described once, in the field table in
// finetune_config.cpp (common/config_fields.h; docs/config.md). validate() is pure and
// throws tupe::Error naming the key.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "common/config_fields.h"
#include "dist/device.h"

namespace tupe::finetune {

/// The epoch whose dev metric a run reports (finetune.select_epoch).
enum class SelectEpoch {
  kBest,  ///< the epoch with the best primary dev metric (the earliest of equals)
  kLast,  ///< the last epoch
};
inline constexpr Choice<SelectEpoch> kSelectEpochWords[] = {{"best", SelectEpoch::kBest}, {"last", SelectEpoch::kLast}};

/// The autocast dtype of fine-tuning and evaluation (finetune.precision).
enum class FinetunePrecision {
  kFp32,  ///< float32 throughout
  kBf16,  ///< bfloat16 autocast
  kAuto,  ///< bf16 on a GPU, fp32 on the CPU
};
inline constexpr Choice<FinetunePrecision> kFinetunePrecisionWords[] = {
    {"fp32", FinetunePrecision::kFp32}, {"bf16", FinetunePrecision::kBf16}, {"auto", FinetunePrecision::kAuto}};
/// Whether `p` autocasts to bf16 on a device that is a GPU when `on_cuda`.
bool uses_bf16(FinetunePrecision p, bool on_cuda);

struct FinetuneOptions {
  FinetuneOptions() { fields().reset(*this); }
  std::string tasks;
  std::string data_dir;
  std::string checkpoint;
  std::string output_dir;
  std::string learning_rates;
  std::string seeds;
  int64_t batch_size;
  int64_t micro_batch_size;
  int64_t epochs;
  double warmup_ratio;
  double beta1;
  double beta2;
  double eps;
  double weight_decay;
  double clip_grad_norm;
  double hidden_dropout;
  double attention_dropout;
  int64_t max_length;
  int64_t train_rows;
  int64_t data_seed;
  int64_t eval_batch_size;
  SelectEpoch select_epoch;
  FinetunePrecision precision;
  dist::DeviceRequest device;
  int64_t threads;
  bool skip_bad_rows;
  bool predict_test;
  bool save_model;
  bool tensorboard;
  std::string model_name;

  /// The field table's ranges, the task list's syntax, the LR grid and the seeds. Throws
  /// tupe::Error "finetune.<key>: <cause>".
  void validate() const;
  /// The parsed LR grid (validated: positive, finite, distinct).
  std::vector<double> learning_rate_list() const;
  /// The parsed seeds (validated: >= 0, distinct).
  std::vector<int64_t> seed_list() const;

  static const FieldTable<FinetuneOptions>& fields();
};

}  // namespace tupe::finetune
