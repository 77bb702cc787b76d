// On-demand shard reading: memory per rank independent of the corpus size (dataset.h,
// DatasetOptions::in_memory false).
//
// What stays in memory is a per-sample index (SampleIndex: length, masking candidates, stored
// checksum or mask count; about 8.5 bytes a sample). Samples are read when the loader asks:
//   own shards, unfiltered (the default)        one pread per chunk run at the chunk's file
//       address: no HDF5 call, no lock, no copy cache; the page cache is shared by the
//       ranks of a node. The bytes read are checked against the sample's checksum
//       (shard_format.h), then the ids against the vocabulary.
//   own shards, compressed; NVIDIA shards      through BlockCache: a block (one chunk of
//       token_ids; R rows of the six NVIDIA datasets) is read under the HDF5 lock,
//       checked, kept decompressed and evicted least-recently-used beyond
//       DatasetOptions::cache_bytes. HDF5's own chunk cache is off (no double caching), and no
//       HDF5 file stays open between loads (HDF5's per-file metadata cache would grow
//       with the shard count). A sample assembled from blocks is checked against its
//       checksum (own shards of version 3 on).
// A shard changed after open (size, modification or change time, or inode differ from open) or
// truncated under a read gives one line "<file>: changed since it was opened ..." instead of
// garbage or a crash; that is also why the readers pread instead of mmap (a truncated mapping
// would raise SIGBUS).
#pragma once
#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/fnv1a.h"
#include "data_pipeline/dataset.h"
#include "data_pipeline/shard_format.h"
#include "data_pipeline/shard_set.h"

namespace tupe::data_pipeline {

/// Per-sample facts of one shard, appended in sample order: 8 bytes a sample (length and
/// candidates < 65536, as max_seq_len <= 65535; the stored checksum of own shards of version
/// 3 on, or the stored-mask count of NVIDIA shards, in one word) side by side, so that a read
/// finds them in the cache lines its offset lookup touched; token offsets once per 16 samples.
class SampleIndex {
 public:
  /// `with_masks`: keep a stored-mask count per sample (NVIDIA shards). `with_checksums`:
  /// keep each sample's stored checksum (own shards of version 3 on). Not both (throws).
  explicit SampleIndex(bool with_masks = false, bool with_checksums = false);
  /// Appends the next sample: `length` tokens (1..65535), `ordinary` masking candidates,
  /// `masks` stored masks (ignored without with_masks), `checksum` its stored checksum
  /// (ignored without with_checksums). Throws tupe::Error when out of range.
  void add(int64_t length, int64_t ordinary, int64_t masks = 0, uint32_t checksum = 0);
  /// Drops the spare capacity left by appending (called when the last sample is added).
  void compact();
  int64_t size() const { return static_cast<int64_t>(entries_.size()); }
  /// T: tokens of all samples.
  int64_t tokens() const { return tokens_; }
  /// Token offset of sample i in the shard: sum of the lengths before it.
  int64_t begin(int64_t i) const;
  int64_t length(int64_t i) const { return entries_[static_cast<size_t>(i)].length; }
  int64_t ordinary(int64_t i) const { return entries_[static_cast<size_t>(i)].ordinary; }
  int64_t mask_count(int64_t i) const { return with_masks_ ? entries_[static_cast<size_t>(i)].tag : 0; }
  /// Whether samples carry checksums (reads are verified).
  bool verified() const { return with_checksums_; }
  /// Stored checksum of sample i (verified() only).
  uint32_t checksum(int64_t i) const { return entries_[static_cast<size_t>(i)].tag; }
  /// FNV-1a 64 over the lengths (each as 8 little-endian bytes), for the ranks' agreement.
  uint64_t lengths_hash() const { return hash_; }
  /// FNV-1a 64 over the stored checksums (each as 4 little-endian bytes): an identity of the
  /// whole file's samples (0 without checksums).
  uint64_t checksums_hash() const { return with_checksums_ ? checksums_hash_ : 0; }
  /// Memory held (bytes).
  int64_t memory_bytes() const;

 private:
  struct Entry {
    uint16_t length;
    uint16_t ordinary;
    uint32_t tag;  // the stored checksum (with_checksums) or mask count (with_masks), else 0
  };
  static constexpr int64_t kBlock = 16;
  bool with_masks_, with_checksums_;
  std::vector<Entry> entries_;
  std::vector<int64_t> block_begin_;  // token offset of samples 0, 16, 32, ...
  int64_t tokens_ = 0;
  uint64_t hash_ = kFnv1a64Basis, checksums_hash_ = kFnv1a64Basis;
};

/// Least-recently-used cache of decompressed blocks, shared by the shards of one dataset and
/// bounded by bytes (at least one block is kept, however small the bound). Thread-safe; a
/// block handed out stays valid while the caller holds it, evicted or not.
class BlockCache {
 public:
  using Block = std::shared_ptr<const ShardContents>;
  explicit BlockCache(int64_t capacity_bytes);
  /// The block under `key`, made by `load` (called without the cache's lock) when absent.
  Block get(uint64_t key, const std::function<ShardContents()>& load);
  /// Loads, hits, evictions, cached and peak bytes.
  ReadStats stats() const;

 private:
  struct Entry {
    uint64_t key;
    Block block;
    int64_t bytes;
  };
  int64_t capacity_bytes_;
  mutable std::mutex mutex_;
  std::list<Entry> lru_;  // most recent first
  std::unordered_map<uint64_t, std::list<Entry>::iterator> where_;
  int64_t cached_bytes_ = 0;
  ReadStats stats_;
};

/// Memory of a block's vectors (bytes).
int64_t block_bytes(const ShardContents& c);

/// (device, inode, size, modification time, status change time) of a file when opened. The
/// change time (ctime) moves with every write and cannot be set back by a user (utimensat
/// sets mtime only), so a rewrite in place that restores size and mtime still changes it.
struct FileIdentity {
  dev_t device = 0;
  ino_t inode = 0;
  int64_t size_bytes = 0;
  int64_t mtime_ns = 0;
  int64_t ctime_ns = 0;
  bool operator==(const FileIdentity&) const = default;
};
/// Identity of the open file `fd` (of `path`, for the message); throws on fstat failure.
FileIdentity file_identity(const std::string& path, int fd);
/// Throws "<path>: changed since it was opened (<what>); it was rewritten or truncated
/// during the run" when `now` differs from `at_open`.
void check_unchanged(const std::string& path, const FileIdentity& at_open, const FileIdentity& now);

/// What ShardSource::scan found: every sample of a shard read once, front to back.
struct ScanResult {
  int64_t samples = 0;         ///< samples checked
  int64_t bad = 0;             ///< samples whose read failed (checksum mismatch, id outside the vocabulary)
  int64_t first_bad = -1;      ///< the first of them (-1 when none)
  std::string first_problem;   ///< its one-line error ("<path>: sample i (...): checksum mismatch: ...")
  int64_t bytes_read = 0;      ///< token bytes read (bytes)
};

/// One shard file read on demand: its index, and sample reads.
class ShardSource {
 public:
  virtual ~ShardSource() = default;
  const SampleIndex& index() const { return index_; }
  const std::string& path() const { return path_; }
  /// File bytes read by pread so far.
  int64_t bytes_read() const { return bytes_read_.load(std::memory_order_relaxed); }
  /// Fills `out` with sample `local` (0 <= local < index().size()). Thread-safe. Throws
  /// tupe::Error "<path>: ..." for a file changed since open, a failed or short read, a
  /// checksum mismatch (index().verified(); checked before the ids are used), or an id
  /// outside the vocabulary.
  virtual void read(int64_t local, Sample& out) const = 0;
  /// Asks the kernel to read sample `local`'s bytes ahead (no effect by default).
  virtual void prefetch(int64_t /*local*/) const {}
  /// Reads and checks every sample once, in file order (tupe verify, data.verify_at_start):
  /// the checks of read(), counting the samples that fail instead of stopping at the first.
  /// Own unfiltered shards read token_ids sequentially in blocks of about `block_bytes`;
  /// the others call read() per sample. Throws only for a file that cannot be read at all
  /// (changed since open, a failed or short pread).
  virtual ScanResult scan(int64_t block_bytes) const;

 protected:
  ShardSource(std::string path, bool with_masks, bool with_checksums = false)
      : index_(with_masks, with_checksums), path_(std::move(path)) {}
  SampleIndex index_;
  std::string path_;
  mutable std::atomic<int64_t> bytes_read_{0};
};

/// Opens own shard `path` (shard_format.h) for reading on demand: header (checked against
/// `options` like read_own_shard), the index (sequence_lengths, and ordinary_counts, or for
/// version 1 shards the candidates counted from token_ids in chunk-sized reads), and the
/// storage (pread by chunk address when unfiltered and little-endian, else `cache`).
/// `cache_key` (< 2^24) tells this shard's blocks apart in the cache. Throws "<path>: ...".
std::unique_ptr<ShardSource> open_own_shard_on_demand(const std::string& path, const DatasetOptions& options,
                                                      ShardHeader& header, std::shared_ptr<BlockCache> cache,
                                                      uint64_t cache_key);

/// Opens NVIDIA shard `path` for reading on demand: every row is read and checked once in
/// blocks (read_nvidia_rows) to build the index, then samples come from `cache`.
/// `max_seq_len` receives L. Throws like read_nvidia_shard.
std::unique_ptr<ShardSource> open_nvidia_shard_on_demand(const std::string& path, const DatasetOptions& options,
                                                         int64_t& max_seq_len, std::shared_ptr<BlockCache> cache,
                                                         uint64_t cache_key);

/// Samples of several on-demand shards back to back. get() is thread-safe.
class OnDemandDataset final : public PretrainDataset {
 public:
  OnDemandDataset(DatasetInfo info, std::vector<std::unique_ptr<ShardSource>> shards, std::shared_ptr<BlockCache> cache);
  int64_t size() const override { return starts_.back(); }
  int64_t length(int64_t i) const override;
  int64_t ordinary_tokens(int64_t i) const override;
  int64_t static_mask_count(int64_t i) const override;
  void get(int64_t i, Sample& out) const override;
  const DatasetInfo& info() const override { return info_; }
  ReadStats read_stats() const override;
  void prefetch(const int64_t* indices, int64_t n) const override;

 private:
  /// (shard, local index) of global sample i; throws for i outside [0, N).
  std::pair<const ShardSource*, int64_t> locate(int64_t i) const;

  DatasetInfo info_;
  std::vector<std::unique_ptr<ShardSource>> shards_;
  std::shared_ptr<BlockCache> cache_;
  std::vector<int64_t> starts_;  // [shards + 1] first global index of each shard, then N
};

}  // namespace tupe::data_pipeline
