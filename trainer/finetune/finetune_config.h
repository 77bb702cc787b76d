// Options of fine-tuning and evaluation ([finetune] section), with the paper's protocol as
// the defaults (docs/model.md "The paper's settings"): LR grid {2e-5, 3e-5, 4e-5, 5e-5} x 5
// seeds, the median over seeds per LR, the best LR reported; batch 32; 10 epochs (5 for MNLI,
// QNLI, QQP); 6% warm-up then decay to 0; dropout 0.1; max length 512 (the model's
// max_positions). The optimizer is pre-training's [optimizer] section (its defaults are the
// paper's fine-tuning values too: AdamW (0.9, 0.999), eps 1e-6, weight decay 0.01, clip 1.0,
// linear decay), of which the protocol sets only the peak LR (each of learning_rates), the
// warm-up (warmup_ratio of the run's steps) and the run's length (epochs); the precision is
// the [precision] section's (default auto). The "shrink" options (train_rows, epochs, seeds,
// learning_rates, max_length) make quick runs. Every field -- its meaning, unit, default and
// range -- is described once, in the field table in finetune_config.cpp
// (common/config_fields.h; docs/config.md). validate() is pure and throws tupe::Error naming
// the key.
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

/// [finetune] section. The former keys beta1, beta2, eps, weight_decay, clip_grad_norm
/// (now [optimizer]) and precision (now [precision]) are refused with one line naming the new key.
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
  double hidden_dropout;
  double attention_dropout;
  int64_t max_length;
  int64_t train_rows;
  int64_t data_seed;
  double selection_fraction;
  int64_t eval_batch_size;
  SelectEpoch select_epoch;
  dist::DeviceRequest device;
  int64_t threads;
  bool skip_bad_rows;
  bool predict_test;
  bool save_model;
  bool overwrite;
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
