// In-memory samples of one or more shards, and the dataset over them (dataset.h).
// Token ids are kept compact (uint16 when the vocabulary allows, else int32) and without
// padding: memory is about 2 bytes per token for a BERT vocabulary.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data_pipeline/dataset.h"

namespace tupe::data_pipeline {

/// Whether `id` is one of the special tokens ([PAD] [UNK] [CLS] [SEP] [MASK]).
inline bool is_special_token(int32_t id, const SpecialTokens& sp) {
  return id == sp.pad || id == sp.unk || id == sp.cls || id == sp.sep || id == sp.mask;
}

/// Masking candidates of a sample: its ids[0..n) that are not special, counted on the
/// original ids (the `masks` stored static masks undone: position k held masked_labels[k]).
int64_t count_ordinary(const int32_t* ids, int64_t n, const SpecialTokens& sp, const int32_t* masked_positions = nullptr,
                       const int32_t* masked_labels = nullptr, int64_t masks = 0);

/// The samples of one shard, decoded. Sample i is tokens [offsets[i], offsets[i+1]).
struct ShardContents {
  std::string path;                     ///< file it came from ("" for memory data)
  std::vector<int64_t> offsets{0};      ///< [N+1] token offsets
  std::vector<uint16_t> ids16;          ///< [T] ids when vocab_size <= 65536
  std::vector<int32_t> ids32;           ///< [T] ids otherwise
  std::vector<int8_t> segments;         ///< [T] segment ids, or empty
  std::vector<int64_t> mask_offsets;    ///< [N+1] offsets into the mask lists, or empty
  std::vector<int32_t> mask_positions;  ///< static masked positions, ascending per sample
  std::vector<int32_t> mask_labels;     ///< original ids at those positions
  std::vector<int8_t> nsp;              ///< [N] next-sentence labels, or empty
  uint64_t checksums_hash = 0;          ///< ShardSummary::checksums_hash of a whole own shard

  int64_t size() const { return static_cast<int64_t>(offsets.size()) - 1; }
  /// Appends one sample's ids (stored as uint16 when `compact`, else int32).
  void append_ids(const int32_t* ids, int64_t n, bool compact);
};

/// Samples of several shards back to back. Immutable; get() is thread-safe.
class ShardSetDataset final : public PretrainDataset {
 public:
  /// Throws tupe::Error when a shard's storage does not match the info (internal misuse).
  ShardSetDataset(DatasetInfo info, std::vector<ShardContents> shards);
  int64_t size() const override { return starts_.back(); }
  int64_t length(int64_t i) const override;
  int64_t ordinary_tokens(int64_t i) const override;
  int64_t static_mask_count(int64_t i) const override;
  void get(int64_t i, Sample& out) const override;
  const DatasetInfo& info() const override { return info_; }

 private:
  /// (shard, local index) of global sample i; throws for i outside [0, N).
  std::pair<const ShardContents*, int64_t> locate(int64_t i) const;

  DatasetInfo info_;
  std::vector<ShardContents> shards_;
  bool compact_;                 // ids stored as uint16
  std::vector<int64_t> starts_;  // [shards + 1] first global index of each shard, then N
  std::vector<std::vector<uint16_t>> ordinary_;  // per shard: ordinary_tokens of each sample
};

/// A dataset over sequences held in memory (each [CLS] ... [SEP], ids < vocab_size), for
/// tests and benchmarks. Throws tupe::Error for an empty sequence or an id out of range.
std::shared_ptr<const PretrainDataset> make_memory_dataset(const std::vector<std::vector<int32_t>>& sequences,
                                                           int64_t vocab_size, SpecialTokens special,
                                                           int64_t max_seq_len);

}  // namespace tupe::data_pipeline
