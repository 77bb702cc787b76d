#include "data_pipeline/loader_config.h"

#include "common/error.h"

namespace tupe::data_pipeline {

std::string to_string(PinMemory p) {
  switch (p) {
    case PinMemory::kAuto: return "auto";
    case PinMemory::kOn: return "true";
    case PinMemory::kOff: return "false";
  }
  return "?";
}

PinMemory parse_pin_memory(const std::string& text) {
  if (text == "auto") return PinMemory::kAuto;
  if (text == "true" || text == "1" || text == "yes" || text == "on") return PinMemory::kOn;
  if (text == "false" || text == "0" || text == "no" || text == "off") return PinMemory::kOff;
  TUPE_FAIL("key 'pin_memory': expected auto, true or false, got '" << text << "'");
}


void LoaderConfig::validate() const {
  TUPE_CHECK(vocab_size >= 0, "data.vocab_size: must be >= 0, got " << vocab_size);
  TUPE_CHECK(global_batch_size >= 1, "data.global_batch_size: must be positive, got " << global_batch_size);
  masking().validate();
  TUPE_CHECK(pad_to_multiple >= 1, "data.pad_to_multiple: must be positive, got " << pad_to_multiple);
  TUPE_CHECK(num_threads >= 0 && num_threads <= 256, "data.num_threads: must be in 0..256, got " << num_threads);
  TUPE_CHECK(prefetch_batches >= 1, "data.prefetch_batches: must be positive, got " << prefetch_batches);
  TUPE_CHECK(read_cache_mb >= 0 && read_cache_mb <= (int64_t{1} << 30),
             "data.read_cache_mb: must be in 0..2^30, got " << read_cache_mb);
}

MaskingConfig LoaderConfig::masking() const {
  MaskingConfig m;
  m.mask_probability = mask_probability;
  m.replace_with_mask = replace_with_mask;
  m.replace_with_random = replace_with_random;
  m.max_predictions = max_predictions;
  return m;
}

DatasetOptions LoaderConfig::dataset_options(const std::string& split, const std::string& expected_vocab_sha256) const {
  DatasetOptions o;
  o.split = split;
  o.expected_vocab_sha256 = expected_vocab_sha256;
  o.vocab_size = vocab_size;
  o.in_memory = load_in_memory;
  o.cache_bytes = read_cache_mb << 20;
  return o;
}

const FieldTable<LoaderConfig>& LoaderConfig::fields() {
  static const FieldTable<LoaderConfig> table = [] {
    FieldTable<LoaderConfig> t;
    t.path_list("train_shards", &LoaderConfig::train_shards, "comma-separated shard files or folders (train split)")
        .path_list("validation_shards", &LoaderConfig::validation_shards,
              "comma-separated shard files or folders (validation split); empty = no validation")
        .integer("vocab_size", &LoaderConfig::vocab_size,
                 "vocabulary size (ids); required for NVIDIA shards, 0 = as recorded in own shards")
        .integer("global_batch_size", &LoaderConfig::global_batch_size,
                 "sequences per optimizer step over all ranks (divisible by the world size)")
        .integer("seed", &LoaderConfig::seed, "seed of the epoch order and the training masks")
        .integer("validation_seed", &LoaderConfig::validation_seed, "seed of the fixed validation masks")
        .real("mask_probability", &LoaderConfig::mask_probability,
              "fraction of non-special tokens predicted per sequence (round, at least 1)")
        .real("replace_with_mask", &LoaderConfig::replace_with_mask, "of predicted tokens: probability of [MASK]")
        .real("replace_with_random", &LoaderConfig::replace_with_random,
              "of predicted tokens: probability of a random non-special id")
        .integer("max_predictions", &LoaderConfig::max_predictions, "cap on predicted tokens per sequence; 0 = none")
        .boolean("use_static_masks", &LoaderConfig::use_static_masks,
                 "NVIDIA shards: use their stored masks (false = restore and mask dynamically)")
        .integer("pad_to_multiple", &LoaderConfig::pad_to_multiple,
                 "pad to the global batch's longest sequence rounded up to this many tokens")
        .boolean("pad_to_max_seq_len", &LoaderConfig::pad_to_max_seq_len, "pad every batch to max_seq_len tokens")
        .integer("num_threads", &LoaderConfig::num_threads, "background threads building batches (0 = in next())")
        .integer("prefetch_batches", &LoaderConfig::prefetch_batches, "batches built ahead at most")
        .boolean("load_in_memory", &LoaderConfig::load_in_memory,
                 "load every shard into memory at start (false = read samples on demand; memory independent of "
                 "the corpus size)")
        .integer("read_cache_mb", &LoaderConfig::read_cache_mb,
                 "on demand: cache of decompressed blocks of compressed or NVIDIA shards, per rank (MiB)")
        .custom(
            "pin_memory", "auto | true | false: page-locked batch tensors for asynchronous CUDA copies (auto: on CUDA)",
            [](const LoaderConfig& c) { return to_string(c.pin_memory); },
            [](LoaderConfig& c, const std::string& v) { c.pin_memory = parse_pin_memory(v); });
    return t;
  }();
  return table;
}

}  // namespace tupe::data_pipeline
