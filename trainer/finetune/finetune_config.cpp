#include "trainer/finetune/finetune_config.h"

#include <cmath>
#include <set>
#include <sstream>

#include "common/error.h"
#include "trainer/finetune/tasks/tasks.h"

namespace tupe::finetune {

namespace {

constexpr Choice<SelectEpoch> kSelectEpochWords[] = {{"best", SelectEpoch::kBest}, {"last", SelectEpoch::kLast}};
constexpr Choice<FinetunePrecision> kPrecisionWords[] = {
    {"fp32", FinetunePrecision::kFp32}, {"bf16", FinetunePrecision::kBf16}, {"auto", FinetunePrecision::kAuto}};

}  // namespace

std::string to_string(SelectEpoch s) { return choice_word(s, kSelectEpochWords); }

SelectEpoch parse_select_epoch(const std::string& key, const std::string& text) {
  return parse_choice(key, text, kSelectEpochWords);
}

std::string to_string(FinetunePrecision p) { return choice_word(p, kPrecisionWords); }

FinetunePrecision parse_finetune_precision(const std::string& key, const std::string& text) {
  return parse_choice(key, text, kPrecisionWords);
}

bool uses_bf16(FinetunePrecision p, bool on_cuda) {
  return p == FinetunePrecision::kBf16 || (p == FinetunePrecision::kAuto && on_cuda);
}

std::vector<double> FinetuneConfig::learning_rate_list() const {
  std::vector<double> out;
  std::set<double> seen;
  for (const auto& item : split_comma_list(learning_rates)) {
    const double lr = parse_double("finetune.learning_rates", item);
    TUPE_CHECK(std::isfinite(lr) && lr > 0, "finetune.learning_rates: " << item << " is not a positive number");
    TUPE_CHECK(seen.insert(lr).second, "finetune.learning_rates: " << item << " listed twice");
    out.push_back(lr);
  }
  TUPE_CHECK(!out.empty(), "finetune.learning_rates: no learning rate given");
  return out;
}

std::vector<int64_t> FinetuneConfig::seed_list() const {
  std::vector<int64_t> out;
  std::set<int64_t> seen;
  for (const auto& item : split_comma_list(seeds)) {
    const int64_t s = parse_int("finetune.seeds", item);
    TUPE_CHECK(s >= 0, "finetune.seeds: " << item << " must be >= 0");
    TUPE_CHECK(seen.insert(s).second, "finetune.seeds: " << item << " listed twice");
    out.push_back(s);
  }
  TUPE_CHECK(!out.empty(), "finetune.seeds: no seed given");
  return out;
}

void FinetuneConfig::validate() const {
  check_task_list_syntax(tasks, "finetune.tasks");  // names are resolved by the job (custom tasks)
  learning_rate_list();
  seed_list();
  TUPE_CHECK(!output_dir.empty(), "finetune.output_dir: must not be empty");
  TUPE_CHECK(batch_size > 0, "finetune.batch_size: must be positive, got " << batch_size);
  TUPE_CHECK(micro_batch_size >= 0, "finetune.micro_batch_size: must be >= 0 (0 = whole share), got " << micro_batch_size);
  TUPE_CHECK(epochs >= 0, "finetune.epochs: must be >= 0 (0 = the paper's), got " << epochs);
  TUPE_CHECK(warmup_ratio >= 0 && warmup_ratio <= 1, "finetune.warmup_ratio: must be in [0, 1], got " << warmup_ratio);
  TUPE_CHECK(beta1 >= 0 && beta1 < 1, "finetune.beta1: must be in [0, 1), got " << beta1);
  TUPE_CHECK(beta2 >= 0 && beta2 < 1, "finetune.beta2: must be in [0, 1), got " << beta2);
  TUPE_CHECK(eps > 0, "finetune.eps: must be positive, got " << eps);
  TUPE_CHECK(weight_decay >= 0, "finetune.weight_decay: must be >= 0, got " << weight_decay);
  TUPE_CHECK(clip_grad_norm >= 0, "finetune.clip_grad_norm: must be >= 0 (0 = off), got " << clip_grad_norm);
  TUPE_CHECK(hidden_dropout >= 0 && hidden_dropout < 1, "finetune.hidden_dropout: must be in [0, 1), got " << hidden_dropout);
  TUPE_CHECK(attention_dropout >= 0 && attention_dropout < 1,
             "finetune.attention_dropout: must be in [0, 1), got " << attention_dropout);
  TUPE_CHECK(max_length == 0 || max_length >= 3,
             "finetune.max_length: must be 0 (the model's max_positions) or >= 3, got " << max_length);
  TUPE_CHECK(train_rows >= 0, "finetune.train_rows: must be >= 0 (0 = all), got " << train_rows);
  TUPE_CHECK(data_seed >= 0, "finetune.data_seed: must be >= 0, got " << data_seed);
  TUPE_CHECK(eval_batch_size > 0, "finetune.eval_batch_size: must be positive, got " << eval_batch_size);
  TUPE_CHECK(threads >= 0, "finetune.threads: must be >= 0, got " << threads);
}

const FieldTable<FinetuneConfig>& FinetuneConfig::fields() {
  using C = FinetuneConfig;
  static const FieldTable<C> table = [] {
    FieldTable<C> t;
    t.text("tasks", &C::tasks,
           "comma-separated GLUE tasks (CoLA, SST-2, MRPC, STS-B, QQP, MNLI, QNLI, RTE, WNLI) or all")
        .path("data_dir", &C::data_dir, "GLUE folder holding <TASK>/{train,dev,test}.tsv and diagnostic/")
        .path("checkpoint", &C::checkpoint, "pre-training checkpoint: a step_<N> folder or a checkpoint dir (newest)")
        .path("output_dir", &C::output_dir, "folder for results.json, results.md, submission/ and models/")
        .text("learning_rates", &C::learning_rates, "peak learning-rate grid, comma-separated")
        .text("seeds", &C::seeds, "seeds per learning rate, comma-separated (head init, data order, dropout)")
        .integer("batch_size", &C::batch_size, "global batch (examples per optimizer step, all ranks)")
        .integer("micro_batch_size", &C::micro_batch_size, "examples per rank per forward/backward (0 = whole share)")
        .integer("epochs", &C::epochs, "training epochs (0 = the paper's: 10; 5 for MNLI, QNLI, QQP)")
        .real("warmup_ratio", &C::warmup_ratio, "fraction of optimizer steps of linear warm-up, then linear decay to 0")
        .real("beta1", &C::beta1, "Adam first-moment decay")
        .real("beta2", &C::beta2, "Adam second-moment decay")
        .real("eps", &C::eps, "Adam epsilon")
        .real("weight_decay", &C::weight_decay, "decoupled weight decay (not on biases, LayerNorm)")
        .real("clip_grad_norm", &C::clip_grad_norm, "max global gradient L2 norm (0 = off)")
        .real("hidden_dropout", &C::hidden_dropout, "dropout probability on embeddings, sublayer outputs, the head")
        .real("attention_dropout", &C::attention_dropout, "dropout probability on attention weights")
        .integer("max_length", &C::max_length, "tokens per example incl. [CLS]/[SEP] (0 = model.max_positions)")
        .integer("train_rows", &C::train_rows, "train on a random subset of this many rows (0 = all)")
        .integer("data_seed", &C::data_seed, "seed of the train_rows subset")
        .integer("eval_batch_size", &C::eval_batch_size, "examples per rank per forward in evaluation")
        .choice("select_epoch", &C::select_epoch, kSelectEpochWords,
                "best | last: the epoch whose dev metric a run reports")
        .choice("precision", &C::precision, kPrecisionWords, "fp32 | bf16 | auto (bf16 on a GPU, fp32 on the CPU)")
        .custom(
            "device", "auto | cpu | cuda (auto: cuda:<local rank> when present)",
            [](const C& c) { return dist::to_string(c.device); },
            [](C& c, const std::string& v) { c.device = dist::parse_device_request(v, "key 'device'"); })
        .integer("threads", &C::threads, "intra-op CPU threads per rank (0 = LibTorch's default)")
        .boolean("skip_bad_rows", &C::skip_bad_rows, "skip and count malformed rows instead of failing")
        .boolean("predict_test", &C::predict_test, "write the submission files for the test sets")
        .boolean("save_model", &C::save_model, "save the fine-tuned weights of each task's reported run")
        .text("model_name", &C::model_name, "row name in the results table (\"\" = the variant, e.g. TUPE-R)");
    return t;
  }();
  return table;
}

}  // namespace tupe::finetune
