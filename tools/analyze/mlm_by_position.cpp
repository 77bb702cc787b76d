#include "tools/analyze/mlm_by_position.h"

#include <ATen/ATen.h>

#include <cstdio>
#include <sstream>

#include "common/config_fields.h"
#include "common/error.h"
#include "common/ini.h"
#include "data_pipeline/dataset.h"
#include "data_pipeline/loader.h"
#include "data_pipeline/loader_config.h"
#include "data_pipeline/text/tokenizer_factory.h"

namespace tupe::analyze {

int64_t position_bucket(int64_t t) {
  TUPE_CHECK(t >= 0, "position_bucket: position " << t << " is negative");
  if (t == 0) return 0;
  if (t < 8) return 1;
  if (t < 32) return 2;
  int64_t k = 3;  // [32, 64)
  for (int64_t top = 64; t >= top; top *= 2) ++k;
  return k;
}

std::pair<int64_t, int64_t> bucket_range(int64_t k) {
  TUPE_CHECK(k >= 0, "bucket_range: bucket " << k << " is negative");
  if (k == 0) return {0, 0};
  if (k == 1) return {1, 7};
  if (k == 2) return {8, 31};
  const int64_t first = int64_t{32} << (k - 3);
  return {first, 2 * first - 1};
}

void add_by_position(const at::Tensor& logits, const at::Tensor& labels, const at::Tensor& positions,
                     std::vector<BucketSums>& sums) {
  TUPE_CHECK(logits.dim() == 2 && labels.dim() == 1 && positions.dim() == 1 && logits.size(0) == labels.size(0) &&
                 labels.size(0) == positions.size(0),
             "add_by_position: logits " << logits.sizes() << ", labels " << labels.sizes() << " and positions "
                                        << positions.sizes() << " do not pair up");
  const at::Tensor x = logits.to(at::kDouble).cpu();
  const at::Tensor ce = at::cross_entropy_loss(x, labels.cpu(), /*weight=*/{}, at::Reduction::None).contiguous();
  const at::Tensor right = x.argmax(/*dim=*/1).eq(labels.cpu()).contiguous();
  const at::Tensor pos = positions.to(at::kLong).cpu().contiguous();
  const double* c = ce.data_ptr<double>();
  const bool* r = right.data_ptr<bool>();
  const int64_t* t = pos.data_ptr<int64_t>();
  for (int64_t m = 0; m < pos.numel(); ++m) {
    const auto k = static_cast<size_t>(position_bucket(t[m]));
    if (sums.size() <= k) sums.resize(k + 1);
    sums[k].masked += 1;
    sums[k].loss_sum += c[m];
    sums[k].correct += r[m] ? 1 : 0;
  }
}

namespace {

/// A CSV cell (RFC 4180): quoted, its quotes doubled, when it holds a comma, a quote or a line break.
std::string csv_cell(const std::string& text) {
  if (text.find_first_of(",\"\n\r") == std::string::npos) return text;
  std::string quoted = "\"";
  for (const char c : text) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
  return quoted + "\"";
}

/// The run's saved [data] settings (masks, batch), on the CPU.
data_pipeline::DataOptions run_data_options(const checkpoint::ModelCheckpoint& ckpt) {
  data_pipeline::DataOptions data;
  data_pipeline::DataOptions::fields().apply(data, ini_section(ckpt.saved_config(), "data"),
                                             ckpt.dir.string() + " [data]");
  data.pin_memory = data_pipeline::PinMemory::kOff;
  return data;
}

std::shared_ptr<const data_pipeline::PretrainDataset> open_validation(const checkpoint::ModelCheckpoint& ckpt,
                                                                      const data_pipeline::DataOptions& data,
                                                                      const std::string& shards) {
  return data_pipeline::open_pretrain_dataset(split_comma_list(shards),
                                              data.dataset_options("validation", ckpt.vocab_sha256()));
}

/// The run's word boundaries when it masked whole words or spans (from the vocabulary its
/// checkpoint carries), else null. Throws tupe::Error when the checkpoint carries none.
std::shared_ptr<const data_pipeline::WordBoundaries> run_word_boundaries(const checkpoint::ModelCheckpoint& ckpt,
                                                                         const data_pipeline::DataOptions& data) {
  if (data.mask_strategy == data_pipeline::MaskStrategy::kToken) return nullptr;
  const auto record = checkpoint::recorded_tokenizer(ckpt);
  TUPE_CHECK(record && !ckpt.carried_vocab().empty(),
             ckpt.dir.string() << ": the run masked with data.mask_strategy = "
                               << data_pipeline::to_string(data.mask_strategy)
                               << ", and the checkpoint carries no vocabulary to find its words (the run had no "
                                  "tokenizer.vocab)");
  data_pipeline::TokenizerOptions options;
  options.vocab = ckpt.carried_vocab().string();
  options.kind = data_pipeline::parse_tokenizer_kind(ckpt.dir.string() + " tokenizer kind", record->kind);
  options.lower_case = record->lower_case;
  return data_pipeline::WordBoundaries::of(*data_pipeline::make_tokenizer(options));
}

std::vector<BucketSums> score(const checkpoint::ModelCheckpoint& ckpt, const data_pipeline::DataOptions& data,
                              const std::shared_ptr<const data_pipeline::PretrainDataset>& dataset,
                              const std::string& shards, int64_t eval_batches) {
  model::TupeBert net = checkpoint::build_model(ckpt);
  net->eval();
  at::NoGradGuard no_grad;
  data_pipeline::EvalIterator it(dataset, data, /*rank=*/0, /*world_size=*/1, run_word_boundaries(ckpt, data));
  std::vector<BucketSums> sums;
  for (int64_t s = 0; eval_batches == 0 || s < eval_batches; ++s) {
    const auto b = it.next();
    if (!b) break;
    if (b->rows() == 0 || b->masked_positions.numel() == 0) continue;
    const at::Tensor logits = net->mlm_logits(b->input_ids, b->attention_mask, b->segment_ids, b->masked_positions);
    // masked_positions are flat indices row * L + column into the (B, L) batch.
    add_by_position(logits, b->masked_labels, b->masked_positions.remainder(b->input_ids.size(1)), sums);
  }
  int64_t masked = 0;
  for (const auto& s : sums) masked += s.masked;
  TUPE_CHECK(masked > 0, shards << ": the validation split has no masked tokens");
  return sums;
}

}  // namespace

int64_t run_eval_batches(const checkpoint::ModelCheckpoint& ckpt) {
  const KeyValues& saved = ckpt.saved_config();
  const auto it = saved.find("train.eval_batches");
  if (it == saved.end()) return 0;
  const int64_t n = parse_int(ckpt.dir.string() + " train.eval_batches", it->second);
  TUPE_CHECK(n >= 0, ckpt.dir.string() << ": train.eval_batches = " << n << " is negative");
  return n;
}

std::vector<BucketSums> mlm_by_position(const checkpoint::ModelCheckpoint& ckpt, const std::string& shards,
                                        int64_t eval_batches) {
  TUPE_CHECK(eval_batches >= 0, "--eval-batches: " << eval_batches << " is negative");
  const data_pipeline::DataOptions data = run_data_options(ckpt);
  return score(ckpt, data, open_validation(ckpt, data, shards), shards, eval_batches);
}

LengthRow mlm_at_length(const checkpoint::ModelCheckpoint& ckpt, const std::string& shards, int64_t eval_batches) {
  TUPE_CHECK(eval_batches >= 0, "--eval-batches: " << eval_batches << " is negative");
  const data_pipeline::DataOptions data = run_data_options(ckpt);
  const auto dataset = open_validation(ckpt, data, shards);
  LengthRow row;
  row.shards = shards;
  row.max_seq_len = dataset->info().max_seq_len;
  // RoPE, ALiBi and NoPE compute their positions for any length: scored past max_positions.
  const int64_t positions = ckpt.config.longest_sequence();
  if (row.max_seq_len > positions) {
    row.note = "not scored: sequences of up to " + std::to_string(row.max_seq_len) + " tokens, the model has " +
               std::to_string(positions) + " positions (a learned position table cannot extrapolate)";
    return row;
  }
  for (const BucketSums& b : score(ckpt, data, dataset, shards, eval_batches)) {
    row.total.masked += b.masked;
    row.total.loss_sum += b.loss_sum;
    row.total.correct += b.correct;
  }
  return row;
}

std::string by_length_csv(const std::vector<LengthRow>& rows) {
  std::ostringstream csv;
  csv << "shards,max_seq_len,masked,loss,accuracy,note\n";
  char line[96];
  for (const LengthRow& r : rows) {
    csv << csv_cell(r.shards) << "," << r.max_seq_len << "," << r.total.masked << ",";
    if (r.total.masked > 0) {
      const double n = static_cast<double>(r.total.masked);
      std::snprintf(line, sizeof line, "%.9g,%.9g,", r.total.loss_sum / n, static_cast<double>(r.total.correct) / n);
      csv << line;
    } else {
      csv << ",,";
    }
    csv << csv_cell(r.note) << "\n";
  }
  return csv.str();
}

std::string by_position_csv(const std::vector<BucketSums>& sums) {
  std::ostringstream csv;
  csv << "bucket,first,last,masked,loss,accuracy\n";
  BucketSums all;
  char line[160];
  for (size_t k = 0; k < sums.size(); ++k) {
    const BucketSums& s = sums[k];
    all.masked += s.masked;
    all.loss_sum += s.loss_sum;
    all.correct += s.correct;
    if (s.masked == 0) continue;
    const auto [first, last] = bucket_range(static_cast<int64_t>(k));
    std::snprintf(line, sizeof line, "%zu,%lld,%lld,%lld,%.9g,%.9g\n", k, static_cast<long long>(first),
                  static_cast<long long>(last), static_cast<long long>(s.masked),
                  s.loss_sum / static_cast<double>(s.masked),
                  static_cast<double>(s.correct) / static_cast<double>(s.masked));
    csv << line;
  }
  if (all.masked > 0) {
    std::snprintf(line, sizeof line, "all,,,%lld,%.9g,%.9g\n", static_cast<long long>(all.masked),
                  all.loss_sum / static_cast<double>(all.masked),
                  static_cast<double>(all.correct) / static_cast<double>(all.masked));
    csv << line;
  }
  return csv.str();
}

}  // namespace tupe::analyze
