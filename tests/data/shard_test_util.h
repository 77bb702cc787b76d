// Helpers of the tests that write shards of their own (test_shards, test_on_demand,
// test_checksums): a header, random [CLS] ... [SEP] sequences, and a committed shard file.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "data_pipeline/counter_rng.h"
#include "data_pipeline/shard_format.h"
#include "data_pipeline/shard_writer.h"

namespace tupe::data_pipeline::test {

/// A train shard's header: shard `shard_index` of `num_shards`, WordPiece, `vocab` ids,
/// vocabulary SHA-256 64 x `sha_char`, sequences of at most `max_seq_len`, full sentences,
/// blank-line documents, command line "test".
inline ShardHeader shard_header(int64_t vocab, int64_t shard_index, int64_t num_shards, char sha_char,
                                int64_t max_seq_len) {
  ShardHeader h;
  h.split = "train";
  h.shard_index = shard_index;
  h.num_shards = num_shards;
  h.tokenizer_kind = "wordpiece";
  h.vocab_size = vocab;
  h.vocab_sha256 = std::string(64, sha_char);
  h.max_seq_len = max_seq_len;
  h.packing = "full_sentences";
  h.documents = "blank_line";
  h.command_line = "test";
  return h;
}

/// `n` sequences [cls] body... [sep] of 3 + rng.below(extra) ids each, drawn from `seed`
/// (CounterRng): the length first, then body(rng) per inner position.
inline std::vector<std::vector<int32_t>> random_sequences(int64_t n, uint64_t seed, uint64_t extra, int32_t cls,
                                                          int32_t sep,
                                                          const std::function<int32_t(CounterRng&)>& body) {
  CounterRng rng(seed);
  std::vector<std::vector<int32_t>> out(static_cast<size_t>(n));
  for (auto& s : out) {
    s.resize(3 + rng.below(extra));
    s.front() = cls;
    s.back() = sep;
    for (size_t j = 1; j + 1 < s.size(); ++j) s[j] = body(rng);
  }
  return out;
}

/// Writes `seqs` as the shard `path` (closed and committed).
inline void write_shard(const std::string& path, const ShardHeader& h, const std::vector<std::vector<int32_t>>& seqs,
                        const ShardWriterOptions& opt = {}) {
  ShardWriter w(path, h, opt);
  for (const auto& q : seqs) w.append(q.data(), static_cast<int64_t>(q.size()));
  w.close();
  w.commit();
}

}  // namespace tupe::data_pipeline::test
