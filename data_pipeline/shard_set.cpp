#include "data_pipeline/shard_set.h"

#include <algorithm>

#include "common/error.h"

namespace tupe::data_pipeline {

int64_t count_ordinary(const int32_t* ids, int64_t n, const SpecialTokens& sp, const int32_t* masked_positions,
                       const int32_t* masked_labels, int64_t masks) {
  int64_t count = 0;
  for (int64_t k = 0; k < n; ++k) count += !is_special_token(ids[k], sp);
  for (int64_t m = 0; m < masks; ++m)
    count += static_cast<int64_t>(!is_special_token(masked_labels[m], sp)) -
             static_cast<int64_t>(!is_special_token(ids[masked_positions[m]], sp));
  return count;
}

void ShardContents::append_ids(const int32_t* ids, int64_t n, bool compact) {
  if (compact)
    for (int64_t k = 0; k < n; ++k) ids16.push_back(static_cast<uint16_t>(ids[k]));
  else
    ids32.insert(ids32.end(), ids, ids + n);
  offsets.push_back(offsets.back() + n);
}

ShardSetDataset::ShardSetDataset(DatasetInfo info, std::vector<ShardContents> shards)
    : info_(std::move(info)), shards_(std::move(shards)), compact_(info_.vocab_size <= 65536) {
  starts_.push_back(0);
  for (const auto& s : shards_) {
    const auto tokens = static_cast<size_t>(s.offsets.back());
    TUPE_CHECK((compact_ ? s.ids16.size() : s.ids32.size()) == tokens,
               s.path << ": internal: token storage does not match the offsets");
    TUPE_CHECK(!info_.has_segment_ids || s.segments.size() == tokens, s.path << ": internal: segment ids missing");
    TUPE_CHECK(!info_.has_static_masks || s.mask_offsets.size() == s.offsets.size(),
               s.path << ": internal: static masks missing");
    TUPE_CHECK(!info_.has_next_sentence_labels || static_cast<int64_t>(s.nsp.size()) == s.size(),
               s.path << ": internal: next-sentence labels missing");
    starts_.push_back(starts_.back() + s.size());
  }
  // Masking candidates per sample, counted once here so that a step's global number of
  // masked tokens needs no sample reads.
  const SpecialTokens& sp = info_.special;
  auto special = [&sp](int32_t id) {
    return id == sp.pad || id == sp.unk || id == sp.cls || id == sp.sep || id == sp.mask;
  };
  for (const auto& s : shards_) {
    std::vector<uint16_t> counts(static_cast<size_t>(s.size()));
    for (int64_t i = 0; i < s.size(); ++i) {
      const auto b = static_cast<size_t>(s.offsets[static_cast<size_t>(i)]);
      const auto e = static_cast<size_t>(s.offsets[static_cast<size_t>(i) + 1]);
      int64_t n = 0;
      for (size_t k = b; k < e; ++k) n += !special(compact_ ? s.ids16[k] : s.ids32[k]);
      if (info_.has_static_masks) {
        for (auto m = s.mask_offsets[static_cast<size_t>(i)]; m < s.mask_offsets[static_cast<size_t>(i) + 1]; ++m) {
          const auto mu = static_cast<size_t>(m);
          const size_t at = b + static_cast<size_t>(s.mask_positions[mu]);
          n += static_cast<int64_t>(!special(s.mask_labels[mu])) - static_cast<int64_t>(!special(compact_ ? s.ids16[at] : s.ids32[at]));
        }
      }
      counts[static_cast<size_t>(i)] = static_cast<uint16_t>(n);
    }
    ordinary_.push_back(std::move(counts));
  }
}

std::pair<const ShardContents*, int64_t> ShardSetDataset::locate(int64_t i) const {
  TUPE_CHECK(i >= 0 && i < size(), "dataset: sample index " << i << " outside [0, " << size() << ")");
  // Last shard whose start is <= i (empty shards have equal starts and are skipped).
  const auto it = std::upper_bound(starts_.begin(), starts_.end(), i) - 1;
  const auto shard = static_cast<size_t>(it - starts_.begin());
  return {&shards_[shard], i - *it};
}

int64_t ShardSetDataset::length(int64_t i) const {
  const auto [s, k] = locate(i);
  return s->offsets[static_cast<size_t>(k) + 1] - s->offsets[static_cast<size_t>(k)];
}

int64_t ShardSetDataset::ordinary_tokens(int64_t i) const {
  const auto [s, k] = locate(i);
  return ordinary_[static_cast<size_t>(s - shards_.data())][static_cast<size_t>(k)];
}

int64_t ShardSetDataset::static_mask_count(int64_t i) const {
  if (!info_.has_static_masks) return 0;
  const auto [s, k] = locate(i);
  return s->mask_offsets[static_cast<size_t>(k) + 1] - s->mask_offsets[static_cast<size_t>(k)];
}

void ShardSetDataset::get(int64_t i, Sample& out) const {
  const auto [s, k] = locate(i);
  const auto ku = static_cast<size_t>(k);
  const int64_t begin = s->offsets[ku], end = s->offsets[ku + 1];
  out.token_ids.resize(static_cast<size_t>(end - begin));
  if (compact_) {
    std::copy(s->ids16.begin() + begin, s->ids16.begin() + end, out.token_ids.begin());
  } else {
    std::copy(s->ids32.begin() + begin, s->ids32.begin() + end, out.token_ids.begin());
  }
  if (info_.has_segment_ids)
    out.segment_ids.assign(s->segments.begin() + begin, s->segments.begin() + end);
  else
    out.segment_ids.clear();
  if (info_.has_static_masks) {
    const int64_t mb = s->mask_offsets[ku], me = s->mask_offsets[ku + 1];
    out.masked_positions.assign(s->mask_positions.begin() + mb, s->mask_positions.begin() + me);
    out.masked_labels.assign(s->mask_labels.begin() + mb, s->mask_labels.begin() + me);
  } else {
    out.masked_positions.clear();
    out.masked_labels.clear();
  }
  out.next_sentence_label = info_.has_next_sentence_labels ? s->nsp[ku] : -1;
}

std::shared_ptr<const PretrainDataset> make_memory_dataset(const std::vector<std::vector<int32_t>>& sequences,
                                                           int64_t vocab_size, SpecialTokens special,
                                                           int64_t max_seq_len) {
  DatasetInfo info;
  info.format = "memory";
  info.max_seq_len = max_seq_len;
  info.vocab_size = vocab_size;
  info.special = special;
  ShardContents c;
  const bool compact = vocab_size <= 65536;
  for (size_t i = 0; i < sequences.size(); ++i) {
    const auto& seq = sequences[i];
    TUPE_CHECK(!seq.empty() && static_cast<int64_t>(seq.size()) <= max_seq_len,
               "memory dataset: sequence " << i << " has " << seq.size() << " tokens, expected 1.." << max_seq_len);
    for (const int32_t id : seq)
      TUPE_CHECK(id >= 0 && id < vocab_size, "memory dataset: sequence " << i << ": id " << id
                                                                         << " outside the vocabulary of size "
                                                                         << vocab_size);
    c.append_ids(seq.data(), static_cast<int64_t>(seq.size()), compact);
  }
  std::vector<ShardContents> shards;
  shards.push_back(std::move(c));
  return std::make_shared<ShardSetDataset>(std::move(info), std::move(shards));
}

}  // namespace tupe::data_pipeline
