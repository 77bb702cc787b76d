// The pre-training dataset interface: N samples, get(i). One interface over the project's
// own shards (shard_format.h) and NVIDIA DeepLearningExamples BERT shards (docs/formats.md
// section 1); tests and benchmarks also use the in-memory MemoryDataset.
//
// Implementations are immutable after construction: get() and length() may be called from
// several threads at once.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data_pipeline/tokenizer.h"

namespace tupe::data_pipeline {

/// One sample, real tokens only (no padding).
struct Sample {
  std::vector<int32_t> token_ids;         ///< [n] ids, [CLS] first; statically masked for NVIDIA shards
  std::vector<int8_t> segment_ids;        ///< [n] 0/1, or empty when the dataset has none
  std::vector<int32_t> masked_positions;  ///< static masks: ascending positions in [0, n), or empty
  std::vector<int32_t> masked_labels;     ///< static masks: original ids at those positions
  int32_t next_sentence_label = -1;       ///< 1 = random next, 0 = real next; -1 = none
};

/// What the data set holds, common to all its samples.
/// What one shard file holds, for the ranks' agreement on their data (dist/small_collectives.h).
struct ShardSummary {
  std::string path;         ///< as listed
  int64_t file_bytes = 0;   ///< size of the file
  int64_t sequences = 0;    ///< samples
  int64_t tokens = 0;       ///< real tokens of all samples
  uint64_t index_hash = 0;  ///< FNV-1a 64 of the samples' lengths, in order
  /// FNV-1a 64 of the samples' stored checksums, in order (each as 4 little-endian bytes):
  /// an identity of every sample's bytes; 0 when the shard has no checksums (shard_format.h)
  uint64_t checksums_hash = 0;
};

struct DatasetInfo {
  std::string format;                     ///< "tupe" | "nvidia" | "memory"
  std::vector<std::string> files;         ///< shard files in sample order
  int64_t max_seq_len = 0;                ///< longest sample (tokens)
  int64_t vocab_size = 0;                 ///< ids are in [0, vocab_size)
  SpecialTokens special;                  ///< special token ids
  std::string vocab_sha256;               ///< "" when the format does not record it (NVIDIA)
  std::string tokenizer_kind;             ///< "" when not recorded
  bool lower_case = true;                 ///< as recorded (NVIDIA: assumed)
  bool has_segment_ids = false;           ///< Sample::segment_ids filled
  bool has_static_masks = false;          ///< Sample::masked_positions/labels filled
  bool has_next_sentence_labels = false;  ///< Sample::next_sentence_label filled
  std::vector<ShardSummary> shards;       ///< one per file, in `files` order (empty for memory data)
};

/// What reading samples has cost so far (on-demand datasets; zeros for in-memory ones).
struct ReadStats {
  int64_t index_bytes = 0;           ///< memory of the per-sample index (bytes)
  int64_t bytes_read = 0;            ///< file bytes read by pread for samples (bytes)
  int64_t block_loads = 0;           ///< decompressed blocks loaded into the cache
  int64_t cache_hits = 0;            ///< sample reads served by a cached block
  int64_t evictions = 0;             ///< blocks dropped to stay under the cache limit
  int64_t cached_bytes = 0;          ///< memory of the blocks cached now (bytes)
  int64_t peak_cached_bytes = 0;     ///< most memory the cache has held (bytes)
};

class PretrainDataset {
 public:
  virtual ~PretrainDataset() = default;
  /// Number of samples N.
  virtual int64_t size() const = 0;
  /// Real tokens of sample i (0 <= i < N), without reading the sample.
  virtual int64_t length(int64_t i) const = 0;
  /// Tokens of sample i that are not special ([PAD] [UNK] [CLS] [SEP] [MASK]), counted on the
  /// original ids (stored masks undone): the masking candidates, without reading the sample.
  virtual int64_t ordinary_tokens(int64_t i) const = 0;
  /// Stored masked positions of sample i (0 without static masks), without reading the sample.
  virtual int64_t static_mask_count(int64_t i) const = 0;
  /// Fills `out` with sample i (reusing its vectors' capacity). Throws tupe::Error for i
  /// outside [0, N).
  virtual void get(int64_t i, Sample& out) const = 0;
  virtual const DatasetInfo& info() const = 0;
  /// Counters of the reads so far (thread-safe).
  virtual ReadStats read_stats() const { return {}; }
  /// Hint that samples indices[0..n) are read soon: on-demand readers ask the kernel to read
  /// their bytes ahead (posix_fadvise WILLNEED), so the reads of one batch go to the disk
  /// together instead of one after another. No effect for data in memory; never throws.
  virtual void prefetch(const int64_t* /*indices*/, int64_t /*n*/) const {}
};

/// How to open shards.
struct DatasetOptions {
  /// Which files of a folder: "train" takes names containing "train" (NVIDIA: "training");
  /// "validation" takes names containing "valid" or "test". Files named directly are always taken.
  std::string split = "train";
  /// Expected hex SHA-256 of the vocabulary; own shards recording another one are refused.
  /// "" = not checked (NVIDIA shards record none and are never refused for it).
  std::string expected_vocab_sha256;
  /// Vocabulary size; every id is checked against it. Required (> 0) for NVIDIA shards;
  /// for own shards 0 takes the recorded size, > 0 must equal it.
  int64_t vocab_size = 0;
  /// Special token ids of NVIDIA shards (they record none); BERT's by default.
  SpecialTokens nvidia_special;
  /// false (default): samples are read on demand (on_demand.h): memory holds a per-sample
  /// index of about 8.5 bytes a sample (its checksum included), whatever the corpus size.
  /// true: every shard is loaded into memory at open (about 2 bytes a token; the reference
  /// the on-demand readers are tested against), every sample's checksum checked then.
  bool in_memory = false;
  /// Bound on the process's cache of decompressed blocks (compressed own shards, NVIDIA
  /// shards) when reading on demand (bytes); at least one block is always kept.
  int64_t cache_bytes = int64_t{128} << 20;
  /// Whether open logs the one-line warning that shards are read unverified (NVIDIA shards,
  /// shards of format versions before checksums). A job whose ranks all open the same set
  /// passes true on rank 0 only, so that the job says it once.
  bool warn_unverified = true;
};

/// Opens `paths` (shard files, or folders whose *.h5 / *.hdf5 / *.hdf5 files of the split are
/// taken, each folder's sorted by name) as one dataset: samples of the files back to back in
/// that order. All files must be of one format and agree on vocabulary, special tokens and
/// max_seq_len; own shards must form whole preprocess sets. On demand (default), open reads
/// each file's header and per-sample index only (own shards; NVIDIA shards record no index,
/// so their rows are scanned once in bounded blocks); options.in_memory loads everything.
/// Throws tupe::Error "<file>: <cause>" for a bad file (missing dataset, wrong dtype,
/// mismatched shapes, truncated data, vocabulary hash mismatch, ids outside the vocabulary:
/// on demand, ids of own shards are checked when a sample is read).
std::shared_ptr<const PretrainDataset> open_pretrain_dataset(const std::vector<std::string>& paths,
                                                             const DatasetOptions& options);

/// The dataset's files as (key, value) entries for the ranks' agreement on what they read
/// (dist/small_collectives.h): "<split> shard <i>" -> "<file name>, <B> bytes, <N> sequences, <T>
/// tokens, lengths hash <hex>[, checksums hash <hex>]". File names without folders, so ranks reading node-local
/// copies at different paths agree; the format and vocabulary come first.
std::vector<std::pair<std::string, std::string>> describe_shards(const DatasetInfo& info, const std::string& split);

/// The shard files open_pretrain_dataset would read, in order.
std::vector<std::string> list_shard_files(const std::vector<std::string>& paths, const std::string& split);

}  // namespace tupe::data_pipeline
