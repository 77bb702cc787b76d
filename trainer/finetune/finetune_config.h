// Options of GLUE fine-tuning and evaluation ([finetune] section), with the paper's protocol
// as the defaults (../shared/TUPE.md "GLUE fine-tuning setting"): LR grid {2e-5, 3e-5, 4e-5,
// 5e-5} x 5 seeds, the median over seeds per LR, the best LR reported; batch 32; 10 epochs
// (5 for MNLI, QNLI, QQP); 6% linear warm-up then linear decay to 0; Adam (0.9, 0.999),
// eps 1e-6, weight decay 0.01; clip 1.0; dropout 0.1; max length 512 (the model's
// max_positions). The "shrink" options (train_rows, epochs, seeds, learning_rates,
// max_length) make quick runs. validate() is pure and throws tupe::Error naming the key.
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
/// "best" | "last".
std::string to_string(SelectEpoch s);
/// Parses "best" | "last"; throws tupe::Error "<key>: expected best or last, got '<text>'".
SelectEpoch parse_select_epoch(const std::string& key, const std::string& text);

/// The autocast dtype of fine-tuning and evaluation (finetune.precision).
enum class FinetunePrecision {
  kFp32,  ///< float32 throughout
  kBf16,  ///< bfloat16 autocast
  kAuto,  ///< bf16 on a GPU, fp32 on the CPU
};
/// "fp32" | "bf16" | "auto".
std::string to_string(FinetunePrecision p);
/// Parses "fp32" | "bf16" | "auto"; throws tupe::Error "<key>: expected fp32, bf16 or auto, got '<text>'".
FinetunePrecision parse_finetune_precision(const std::string& key, const std::string& text);
/// Whether `p` autocasts to bf16 on a device that is a GPU when `on_cuda`.
bool uses_bf16(FinetunePrecision p, bool on_cuda);

struct FinetuneConfig {
  std::string tasks = "all";         ///< comma-separated GLUE tasks (CoLA, SST-2, MRPC, STS-B, QQP, MNLI, QNLI, RTE, WNLI) or all
  std::string data_dir;              ///< the GLUE folder: <data_dir>/<TASK>/{train,dev,test}.tsv, diagnostic/
  std::string checkpoint;            ///< pre-training checkpoint: a step_<N> folder, or a checkpoint.dir (its newest whole one)
  std::string output_dir = "glue_results";  ///< results.json, results.md, submission/, models/
  std::string learning_rates = "2e-5,3e-5,4e-5,5e-5";  ///< peak LR grid (comma-separated)
  std::string seeds = "1,2,3,4,5";   ///< seeds per LR (sentence-head init, data order, dropout)
  int64_t batch_size = 32;           ///< global batch (examples per optimizer step over all ranks)
  int64_t micro_batch_size = 0;      ///< examples per rank per forward/backward (0 = the rank's whole share)
  int64_t epochs = 0;                ///< training epochs; 0 = the paper's per task (10; 5 for MNLI, QNLI, QQP)
  double warmup_ratio = 0.06;        ///< fraction of the optimizer steps of linear warm-up
  double beta1 = 0.9;                ///< Adam first-moment decay
  double beta2 = 0.999;              ///< Adam second-moment decay
  double eps = 1e-6;                 ///< Adam epsilon
  double weight_decay = 0.01;        ///< decoupled weight decay (not on biases and LayerNorm parameters)
  double clip_grad_norm = 1.0;       ///< max global gradient L2 norm (0 = no clipping)
  double hidden_dropout = 0.1;       ///< dropout on embeddings, sublayer outputs and the sentence head
  double attention_dropout = 0.1;    ///< dropout on attention probabilities
  int64_t max_length = 0;            ///< tokens per example incl. [CLS]/[SEP]; 0 = model.max_positions (paper: 512)
  int64_t train_rows = 0;            ///< train on a random subset of this many rows (0 = all)
  int64_t data_seed = 1;             ///< seed of the train_rows subset
  int64_t eval_batch_size = 64;      ///< examples per rank per forward in evaluation
  SelectEpoch select_epoch = SelectEpoch::kBest;           ///< best | last: the epoch whose dev metric a run reports
  FinetunePrecision precision = FinetunePrecision::kAuto;  ///< fp32 | bf16 | auto (bf16 on a GPU, fp32 on the CPU)
  dist::DeviceRequest device =
      dist::DeviceRequest::kAuto;    ///< auto | cpu | cuda (auto: cuda:<local rank> when a GPU is present)
  int64_t threads = 0;               ///< intra-op CPU threads per rank (0 = LibTorch's default)
  bool skip_bad_rows = false;        ///< skip (and count) malformed rows instead of failing
  bool predict_test = true;          ///< write the benchmark's submission files for the test sets
  bool save_model = true;            ///< save the fine-tuned weights of each task's reported run
  std::string model_name;            ///< row name in the results table; "" = the variant (TUPE-R, BERT-A, ...)

  /// Throws tupe::Error "finetune.<key>: <cause>".
  void validate() const;
  /// The parsed LR grid (validated: positive, finite, distinct).
  std::vector<double> learning_rate_list() const;
  /// The parsed seeds (validated: >= 0, distinct).
  std::vector<int64_t> seed_list() const;

  static const FieldTable<FinetuneConfig>& fields();
};

}  // namespace tupe::finetune
