#include "data_pipeline/loader_config.h"

#include "common/error.h"

namespace tupe::data_pipeline {

void DataOptions::validate() const {
  fields().check(*this);
  masking().validate();
}

MaskingConfig DataOptions::masking() const {
  MaskingConfig m;
  m.mask_probability = mask_probability;
  m.replace_with_mask = replace_with_mask;
  m.replace_with_random = replace_with_random;
  m.max_predictions = max_predictions;
  m.strategy = mask_strategy;
  return m;
}

DatasetOptions DataOptions::dataset_options(const std::string& split, const std::string& expected_vocab_sha256) const {
  DatasetOptions o;
  o.split = split;
  o.expected_vocab_sha256 = expected_vocab_sha256;
  o.vocab_size = vocab_size;
  o.in_memory = load_in_memory;
  o.cache_bytes = read_cache_mb << 20;
  return o;
}

const FieldTable<DataOptions>& DataOptions::fields() {
  using L = DataOptions;
  static const FieldTable<L> table = [] {
    FieldTable<L> t("data");
    t.path_list("train_shards", &L::train_shards, "", "comma-separated shard files or folders (train split)")
        .path_list("validation_shards", &L::validation_shards, "",
                   "comma-separated shard files or folders (validation split); \"\" = no validation")
        .integer("vocab_size", &L::vocab_size, 0, "ids",
                 "vocabulary size; required for NVIDIA shards, 0 = as recorded in own shards")
        .at_least(0)
        .integer("global_batch_size", &L::global_batch_size, 256, "sequences",
                 "B: per optimizer step over all ranks (divisible by the world size)")
        .positive()
        .integer("seed", &L::seed, 1234, "", "seed of the epoch order and the training masks")
        .integer("validation_seed", &L::validation_seed, 4321, "", "seed of the validation masks (fixed: not per epoch)")
        .real("mask_probability", &L::mask_probability, 0.15, "fraction",
              "of the non-special tokens predicted per sequence (rounded, at least 1; whole_word and span: whole words "
              "within that budget, at least one word)")
        .above(0)
        .at_most(1)
        .real("replace_with_mask", &L::replace_with_mask, 0.8, "probability", "of a predicted token: shown as [MASK]")
        .at_least(0)
        .at_most(1)
        .real("replace_with_random", &L::replace_with_random, 0.1, "probability",
              "of a predicted token: shown as a random non-special id (replace_with_mask + this <= 1)")
        .at_least(0)
        .at_most(1)
        .integer("max_predictions", &L::max_predictions, 0, "tokens", "cap on predicted tokens per sequence; 0 = none")
        .at_least(0)
        .choice("mask_strategy", &L::mask_strategy, kMaskStrategyWords, MaskStrategy::kToken,
                "what is masked together: token (word pieces independently), whole_word (all pieces of a word) or "
                "span (SpanBERT's geometric spans of whole words); whole_word and span need tokenizer.vocab")
        .boolean("use_static_masks", &L::use_static_masks, true,
                 "NVIDIA shards: use their stored masks (false = restore the tokens and mask dynamically)")
        .integer("pad_to_multiple", &L::pad_to_multiple, 8, "tokens",
                 "pad to the global batch's longest sequence rounded up to this")
        .positive()
        .boolean("pad_to_max_seq_len", &L::pad_to_max_seq_len, false, "pad every batch to max_seq_len instead")
        .integer("num_threads", &L::num_threads, 1, "", "background threads building batches; 0 = build in next()")
        .at_least(0)
        .at_most(256)
        .integer("prefetch_batches", &L::prefetch_batches, 4, "batches", "built ahead at most (a bounded queue)")
        .positive()
        .choice("pin_memory", &L::pin_memory, kPinMemoryWords, PinMemory::kAuto,
                "page-locked batch tensors for asynchronous CUDA copies (auto: when training on CUDA; true needs CUDA)")
        .boolean("load_in_memory", &L::load_in_memory, false,
                 "load every shard at start (false = read samples on demand; memory independent of the corpus size)")
        .integer("read_cache_mb", &L::read_cache_mb, 128, "MiB",
                 "on demand: cache of decompressed blocks of compressed or NVIDIA shards, per rank")
        .at_least(0)
        .at_most(1 << 30)
        .boolean("verify_at_start", &L::verify_at_start, false,
                 "before step 1, check the train and validation shards as `tupe verify --shards` does (the set, every "
                 "header, every sample's checksum; the files dealt to the ranks) and end the job with its lines when "
                 "any is damaged");
    return t;
  }();
  return table;
}

}  // namespace tupe::data_pipeline
