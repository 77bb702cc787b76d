// What the step benchmarks (variant_step_bench, step_profile) set up alike: a padded loader
// over training shards on one rank, and a BERT-shaped encoder's options.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "common/config_fields.h"
#include "data_pipeline/loader.h"
#include "model/config.h"

namespace tupe::bench {

/// One rank's loader over `shards` (a file or folder, comma-separated), batches of `batch`
/// sequences padded to the shards' length. Throws tupe::Error for unreadable shards.
struct BenchData {
  std::shared_ptr<const data_pipeline::PretrainDataset> dataset;
  std::unique_ptr<data_pipeline::Loader> loader;
};
inline BenchData open_bench_data(const std::string& shards, int64_t batch) {
  data_pipeline::DataOptions options;
  options.global_batch_size = batch;
  options.pad_to_max_seq_len = true;
  BenchData d;
  d.dataset = data_pipeline::open_pretrain_dataset(split_comma_list(shards), options.dataset_options("train", ""));
  d.loader = std::make_unique<data_pipeline::Loader>(d.dataset, options, 0, 1);
  return d;
}

/// A BERT-shaped encoder: heads = d / 64, FFN 4 d, `variant` the position encoding, the [CLS]
/// untie on where a learned positional logit term exists (BERT-A, BERT-A^d, RoPE, ALiBi and NoPE
/// have nothing to untie).
inline model::ModelOptions bench_model(int64_t vocab_size, int64_t hidden, int64_t layers, int64_t max_positions,
                                       const std::string& variant) {
  model::ModelOptions mc;
  mc.vocab_size = vocab_size;
  mc.hidden_size = hidden;
  mc.num_layers = layers;
  mc.num_heads = hidden / 64;
  mc.ffn_size = 4 * hidden;
  mc.max_positions = max_positions;
  mc.position_encoding = model::parse_position_encoding(variant);
  mc.untie_cls = mc.has_learned_logit_term();
  return mc;
}

}  // namespace tupe::bench
