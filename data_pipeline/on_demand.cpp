// The pieces of on-demand reading shared by all shard kinds (on_demand.h): the per-sample
// index, the block cache, file identity checks and the dataset over shard sources.
#include "data_pipeline/on_demand.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <sstream>

#include "common/error.h"

namespace tupe::data_pipeline {

// ---- SampleIndex -----------------------------------------------------------------------

SampleIndex::SampleIndex(bool with_masks, bool with_checksums)
    : with_masks_(with_masks), with_checksums_(with_checksums) {
  TUPE_CHECK(!(with_masks && with_checksums), "shard index: stored masks and checksums together (internal)");
}

void SampleIndex::add(int64_t length, int64_t ordinary, int64_t masks, uint32_t checksum) {
  TUPE_CHECK(length >= 1 && length <= 65535 && ordinary >= 0 && ordinary <= length && masks >= 0 && masks <= length,
             "shard index: sample " << size() << " has length " << length << ", " << ordinary << " candidates, "
                                    << masks << " stored masks (internal)");
  if (size() % kBlock == 0) block_begin_.push_back(tokens_);
  entries_.push_back({static_cast<uint16_t>(length), static_cast<uint16_t>(ordinary),
                      with_checksums_ ? checksum
                      : with_masks_   ? static_cast<uint32_t>(masks)
                                      : 0u});
  tokens_ += length;
  char bytes[8];
  for (int b = 0; b < 8; ++b) bytes[b] = static_cast<char>((static_cast<uint64_t>(length) >> (8 * b)) & 0xff);
  hash_ = fnv1a_64(std::string_view(bytes, 8), hash_);
  if (with_checksums_) {
    for (int b = 0; b < 4; ++b) bytes[b] = static_cast<char>((checksum >> (8 * b)) & 0xff);
    checksums_hash_ = fnv1a_64(std::string_view(bytes, 4), checksums_hash_);
  }
}

void SampleIndex::compact() {
  entries_.shrink_to_fit();
  block_begin_.shrink_to_fit();
}

int64_t SampleIndex::begin(int64_t i) const {
  const int64_t block = i / kBlock;
  int64_t offset = block_begin_[static_cast<size_t>(block)];
  for (int64_t k = block * kBlock; k < i; ++k) offset += entries_[static_cast<size_t>(k)].length;
  return offset;
}

int64_t SampleIndex::memory_bytes() const {
  return static_cast<int64_t>(entries_.capacity() * sizeof(Entry) + block_begin_.capacity() * sizeof(int64_t));
}

// ---- BlockCache ------------------------------------------------------------------------

int64_t block_bytes(const ShardContents& c) {
  return static_cast<int64_t>(c.offsets.capacity() * 8 + c.ids16.capacity() * 2 + c.ids32.capacity() * 4 +
                              c.segments.capacity() + c.mask_offsets.capacity() * 8 +
                              (c.mask_positions.capacity() + c.mask_labels.capacity()) * 4 + c.nsp.capacity() +
                              sizeof(ShardContents));
}

BlockCache::BlockCache(int64_t capacity_bytes) : capacity_bytes_(capacity_bytes) {
  TUPE_CHECK(capacity_bytes_ >= 0, "data: block cache bound " << capacity_bytes_ << " bytes is negative");
}

BlockCache::Block BlockCache::get(uint64_t key, const std::function<ShardContents()>& load) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto it = where_.find(key);
    if (it != where_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);  // most recent first
      ++stats_.cache_hits;
      return it->second->block;
    }
  }
  // Loaded without the cache's lock: other threads keep hitting meanwhile. Two threads that
  // miss the same block both load it; the second insert finds the first and uses it.
  auto block = std::make_shared<const ShardContents>(load());
  const int64_t bytes = block_bytes(*block);
  std::lock_guard<std::mutex> lock(mutex_);
  ++stats_.block_loads;
  const auto it = where_.find(key);
  if (it != where_.end()) return it->second->block;
  lru_.push_front({key, block, bytes});
  where_[key] = lru_.begin();
  cached_bytes_ += bytes;
  while (cached_bytes_ > capacity_bytes_ && lru_.size() > 1) {
    const Entry& old = lru_.back();
    cached_bytes_ -= old.bytes;
    where_.erase(old.key);
    lru_.pop_back();
    ++stats_.evictions;
  }
  stats_.peak_cached_bytes = std::max(stats_.peak_cached_bytes, cached_bytes_);
  return block;
}

ReadStats BlockCache::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  ReadStats s = stats_;
  s.cached_bytes = cached_bytes_;
  return s;
}

// ---- File identity ---------------------------------------------------------------------

FileIdentity file_identity(const std::string& path, int fd) {
  struct stat st {};
  TUPE_CHECK(::fstat(fd, &st) == 0, path << ": cannot stat (" << std::strerror(errno) << ")");
  FileIdentity id;
  id.device = st.st_dev;
  id.inode = st.st_ino;
  id.size_bytes = static_cast<int64_t>(st.st_size);
  id.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  id.ctime_ns = static_cast<int64_t>(st.st_ctim.tv_sec) * 1000000000 + st.st_ctim.tv_nsec;
  return id;
}

void check_unchanged(const std::string& path, const FileIdentity& at_open, const FileIdentity& now) {
  if (now == at_open) return;
  std::ostringstream what;
  if (now.size_bytes != at_open.size_bytes)
    what << "size " << at_open.size_bytes << " -> " << now.size_bytes << " bytes";
  else if (now.inode != at_open.inode || now.device != at_open.device)
    what << "replaced by another file";
  else if (now.mtime_ns != at_open.mtime_ns)
    what << "modified in place";
  else
    what << "modified in place with its modification time restored, or its permissions or links changed: its "
            "change time moved";
  TUPE_FAIL(path << ": changed since it was opened (" << what.str()
                 << "); it was rewritten or truncated during the run: restart from the last checkpoint");
}

// ---- ShardSource -----------------------------------------------------------------------

ScanResult ShardSource::scan(int64_t /*block_bytes*/) const {
  ScanResult r;
  Sample sample;
  const int64_t before = bytes_read();
  for (int64_t i = 0; i < index_.size(); ++i) {
    try {
      read(i, sample);
    } catch (const Error& e) {
      if (r.bad++ == 0) {
        r.first_bad = i;
        r.first_problem = e.what();
      }
    }
    ++r.samples;
  }
  r.bytes_read = bytes_read() - before;
  return r;
}

// ---- OnDemandDataset -------------------------------------------------------------------

OnDemandDataset::OnDemandDataset(DatasetInfo info, std::vector<std::unique_ptr<ShardSource>> shards,
                                 std::shared_ptr<BlockCache> cache)
    : info_(std::move(info)), shards_(std::move(shards)), cache_(std::move(cache)) {
  starts_.push_back(0);
  for (const auto& s : shards_) starts_.push_back(starts_.back() + s->index().size());
}

std::pair<const ShardSource*, int64_t> OnDemandDataset::locate(int64_t i) const {
  TUPE_CHECK(i >= 0 && i < size(), "dataset: sample index " << i << " outside [0, " << size() << ")");
  // Last shard whose start is <= i (empty shards have equal starts and are skipped).
  const auto it = std::upper_bound(starts_.begin(), starts_.end(), i) - 1;
  return {shards_[static_cast<size_t>(it - starts_.begin())].get(), i - *it};
}

int64_t OnDemandDataset::length(int64_t i) const {
  const auto [s, k] = locate(i);
  return s->index().length(k);
}

int64_t OnDemandDataset::ordinary_tokens(int64_t i) const {
  const auto [s, k] = locate(i);
  return s->index().ordinary(k);
}

int64_t OnDemandDataset::static_mask_count(int64_t i) const {
  if (!info_.has_static_masks) return 0;
  const auto [s, k] = locate(i);
  return s->index().mask_count(k);
}

void OnDemandDataset::get(int64_t i, Sample& out) const {
  const auto [s, k] = locate(i);
  s->read(k, out);
}

void OnDemandDataset::prefetch(const int64_t* indices, int64_t n) const {
  for (int64_t k = 0; k < n; ++k) {
    if (indices[k] < 0 || indices[k] >= size()) continue;  // get() names the bad index
    const auto [s, local] = locate(indices[k]);
    s->prefetch(local);
  }
}

ReadStats OnDemandDataset::read_stats() const {
  ReadStats r = cache_ ? cache_->stats() : ReadStats{};
  for (const auto& s : shards_) {
    r.index_bytes += s->index().memory_bytes();
    r.bytes_read += s->bytes_read();
  }
  return r;
}

}  // namespace tupe::data_pipeline
