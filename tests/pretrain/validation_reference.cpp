// validation_reference STEP_FOLDER: the validation MLM loss of a pre-training checkpoint,
// recomputed on one process in float64, for pretrain_checks.py's `validation` check, which
// compares it with the loss the job's evaluation logged.
// Independent of the job's evaluation (trainer/pretrain/pretrain_loop.cpp): no masked_lm_loss_sum,
// no device sums, no all-reduce, no rank split. It takes the checkpoint's weights
// (checkpoint::build_model) cast to float64, the validation batches of its saved [data]
// settings (data_pipeline::EvalIterator over world size 1: the same global steps and masks,
// which depend on data.seed and the sample only), the first train.eval_batches steps, and the
// cross-entropy -log softmax(logits)[label] summed in float64 over every masked token; the
// masked-token accuracy counts the tokens whose label's logit is the largest (the first of
// equal ones), and "near_ties" the tokens whose label's logit and the largest other one differ
// by under 1e-4 (where the job's float32 argmax may rightly decide otherwise).
// Prints one JSON line: {"validation_loss": L, "validation_accuracy": A, "near_ties": T,
// "masked": M, "steps": S}. Exit 1 with one line on stderr on bad input.
#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <exception>
#include <string>

#include "checkpoint/model_checkpoint.h"
#include "common/config_fields.h"
#include "common/error.h"
#include "common/ini.h"
#include "data_pipeline/dataset.h"
#include "data_pipeline/loader.h"
#include "data_pipeline/loader_config.h"

int main(int argc, char** argv) {
  using namespace tupe;
  try {
    TUPE_CHECK(argc == 2, "usage: validation_reference STEP_FOLDER");
    const checkpoint::ModelCheckpoint ckpt = checkpoint::read_model_checkpoint(argv[1]);
    const KeyValues& saved = ckpt.saved_config();
    data_pipeline::DataOptions data;
    data_pipeline::DataOptions::fields().apply(data, ini_section(saved, "data"), ckpt.dir.string() + " [data]");
    data.pin_memory = data_pipeline::PinMemory::kOff;
    TUPE_CHECK(!data.validation_shards.empty(), argv[1] << ": the run had no data.validation_shards");
    const auto eval_batches = saved.find("train.eval_batches");
    TUPE_CHECK(eval_batches != saved.end(), argv[1] << ": no train.eval_batches in the saved config");
    const int64_t steps_wanted = parse_int("train.eval_batches", eval_batches->second);
    const auto dataset = data_pipeline::open_pretrain_dataset(split_comma_list(data.validation_shards),
                                                              data.dataset_options("validation", ckpt.vocab_sha256()));
    model::TupeBert net = checkpoint::build_model(ckpt);
    net->to(at::kDouble);
    net->eval();
    data_pipeline::EvalIterator it(dataset, data, /*rank=*/0, /*world_size=*/1);
    at::NoGradGuard no_grad;
    double sum = 0;
    int64_t masked = 0, steps = 0, correct = 0, near_ties = 0;
    for (; steps_wanted == 0 || steps < steps_wanted; ++steps) {
      const auto b = it.next();
      if (!b) break;
      if (b->rows() == 0 || b->masked_positions.numel() == 0) continue;
      const at::Tensor logits =
          net->mlm_logits(b->input_ids, b->attention_mask, b->segment_ids, b->masked_positions).to(at::kDouble);
      const at::Tensor log_p = at::log_softmax(logits, /*dim=*/1);
      sum -= log_p.gather(1, b->masked_labels.unsqueeze(1)).sum().item<double>();
      masked += b->masked_positions.numel();
      const at::Tensor cpu = logits.contiguous().cpu();
      const auto rows = cpu.accessor<double, 2>();
      const auto labels = b->masked_labels.accessor<int64_t, 1>();
      for (int64_t m = 0; m < cpu.size(0); ++m) {
        const int64_t label = labels[m];
        int64_t best = 0;  // the first largest logit
        double other = -INFINITY;  // the largest logit of any other id
        for (int64_t v = 0; v < cpu.size(1); ++v) {
          if (rows[m][v] > rows[m][best]) best = v;
          if (v != label) other = std::max(other, rows[m][v]);
        }
        correct += best == label ? 1 : 0;
        near_ties += std::abs(rows[m][label] - other) < 1e-4 ? 1 : 0;
      }
    }
    TUPE_CHECK(masked > 0, argv[1] << ": the validation split has no masked tokens");
    std::printf(
        "{\"validation_loss\": %.17g, \"validation_accuracy\": %.17g, \"near_ties\": %lld, \"masked\": %lld, "
        "\"steps\": %lld}\n",
        sum / static_cast<double>(masked), static_cast<double>(correct) / static_cast<double>(masked),
        static_cast<long long>(near_ties), static_cast<long long>(masked), static_cast<long long>(steps));
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "validation_reference: error: %s\n", e.what());
    return 1;
  }
}
