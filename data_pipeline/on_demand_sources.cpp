// The shard sources of on-demand reading (on_demand.h): own shards by pread or through the
// block cache, NVIDIA shards through the block cache.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>

#include "common/error.h"
#include "data_pipeline/hdf5_util.h"
#include "data_pipeline/on_demand.h"
#include "data_pipeline/own_direct_source.h"
#include "data_pipeline/shard_readers.h"

namespace tupe::data_pipeline {

namespace {

using detail::check_id;
using detail::OwnDirectSource;

/// Identity of `path` by name (for sources that keep no descriptor open).
FileIdentity path_identity(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  TUPE_CHECK(fd >= 0, path << ": cannot open (" << std::strerror(errno) << "): removed since it was opened?");
  FileIdentity id;
  try {
    id = file_identity(path, fd);
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
  return id;
}

/// Cache key of block `block` of shard `shard`.
uint64_t block_key(uint64_t shard, int64_t block) { return (shard << 40) | static_cast<uint64_t>(block); }

/// Opens a 1-D integer dataset of an own shard with HDF5's chunk cache off; `numel` gets its length.
h5::Id open_1d(const std::string& path, hid_t file, const char* name, hsize_t& numel, size_t& element_bytes,
               bool& is_signed) {
  TUPE_CHECK(h5::has_dataset(file, name), path << ": missing dataset '" << name << "'");
  h5::Id dapl(H5Pcreate(H5P_DATASET_ACCESS), H5Pclose);
  H5Pset_chunk_cache(dapl.get(), 0, 0, 1.0);  // our cache bounds memory; no second copy in HDF5
  h5::Id ds(H5Dopen2(file, name, dapl.get()), H5Dclose);
  TUPE_CHECK(ds.valid(), path << ": dataset '" << name << "': cannot open: " << h5::error_text());
  h5::Id type(H5Dget_type(ds.get()), H5Tclose);
  TUPE_CHECK(H5Tget_class(type.get()) == H5T_INTEGER,
             path << ": dataset '" << name << "' has dtype " << h5::describe_type(type.get()) << ", expected an integer type");
  const std::vector<hsize_t> dims = h5::dataset_dims(path, file, name);
  TUPE_CHECK(dims.size() == 1, path << ": dataset '" << name << "' has " << dims.size() << " dimensions, expected 1");
  element_bytes = H5Tget_size(type.get());
  is_signed = H5Tget_sign(type.get()) == H5T_SGN_2;
  numel = h5::checked_numel(path, name, dims, element_bytes);
  h5::check_readable(path, ds.get(), name, numel * element_bytes);
  return ds;
}

/// Reads a 1-D dataset front to back in blocks of `block` elements.
template <class T>
class Stream {
 public:
  Stream(const std::string& path, hid_t ds, const char* name, hsize_t numel, hsize_t block)
      : path_(path), ds_(ds), name_(name), numel_(numel), block_(block) {}
  T next() {
    if (at_ == buf_.size()) {
      const hsize_t n = std::min(block_, numel_ - done_);
      TUPE_CHECK(n > 0, path_ << ": dataset '" << name_ << "' ends early (internal)");
      h5::read_integer_rows(path_, ds_, name_, done_, n, buf_);
      done_ += n;
      at_ = 0;
    }
    return buf_[at_++];
  }

 private:
  const std::string& path_;
  hid_t ds_;
  const char* name_;
  hsize_t numel_, block_, done_ = 0;
  std::vector<T> buf_;
  size_t at_ = 0;
};

/// A shard read in blocks through the dataset's BlockCache: block b holds units
/// [b*block, (b+1)*block) of `count` (tokens of an own shard, rows of an NVIDIA one).
class CachedSource : public ShardSource {
 public:
  CachedSource(const std::string& path, bool with_masks, bool with_checksums, int64_t count, int64_t block,
               int64_t vocab_size, std::shared_ptr<BlockCache> cache, uint64_t key)
      : ShardSource(path, with_masks, with_checksums),
        count_(count),
        block_(block),
        vocab_(vocab_size),
        cache_(std::move(cache)),
        key_(key),
        identity_(path_identity(path)) {}
  SampleIndex& mutable_index() { return index_; }

 protected:
  /// Block b, loaded by `load(b)` when the cache lacks it.
  BlockCache::Block block(int64_t b) const {
    return cache_->get(block_key(key_, b), [&] { return load(b); });
  }
  /// Reads and checks block b (under the HDF5 lock, after checking the file is unchanged).
  virtual ShardContents load(int64_t b) const = 0;

  int64_t count_, block_, vocab_;
  std::shared_ptr<BlockCache> cache_;
  uint64_t key_;
  FileIdentity identity_;
};

/// Own shard with compressed (or big-endian) token_ids: chunk-sized blocks through the cache.
class OwnCachedSource final : public CachedSource {
 public:
  OwnCachedSource(const std::string& path, int64_t num_tokens, int64_t block_tokens, int64_t vocab_size,
                  size_t token_bytes, bool verified, std::shared_ptr<BlockCache> cache, uint64_t key)
      : CachedSource(path, false, verified, num_tokens, block_tokens, vocab_size, std::move(cache), key),
        token_bytes_(token_bytes) {}

  void read(int64_t local, Sample& out) const override {
    const int64_t begin = index_.begin(local), n = index_.length(local);
    out.token_ids.resize(static_cast<size_t>(n));
    for (int64_t pos = begin; pos < begin + n;) {
      const int64_t b = pos / block_;
      const BlockCache::Block blk = block(b);
      const int64_t within = pos - b * block_;
      const int64_t take = std::min(begin + n - pos, blk->offsets.back() - within);
      auto* dst = out.token_ids.data() + (pos - begin);
      if (!blk->ids16.empty())
        std::copy_n(blk->ids16.begin() + within, take, dst);
      else
        std::copy_n(blk->ids32.begin() + within, take, dst);
      pos += take;
    }
    // Checked as stored (each id re-encoded to the stored width) before the ids are used.
    if (index_.verified() && sample_checksum_of_ids(index_.ordinary(local), out.token_ids.data(), n, token_bytes_) !=
                                 index_.checksum(local)) {
      out.token_ids.clear();
      fail_checksum_mismatch(path_, local, begin, n);
    }
    bool outside = false;
    for (const int32_t id : out.token_ids) outside |= id < 0 || id >= vocab_;
    for (int64_t k = 0; outside && k < n; ++k)
      check_id(path_, out.token_ids[static_cast<size_t>(k)], vocab_, begin + k);
    out.segment_ids.clear();
    out.masked_positions.clear();
    out.masked_labels.clear();
    out.next_sentence_label = -1;
  }

 private:
  ShardContents load(int64_t b) const override {
    const int64_t first = b * block_, n = std::min(block_, count_ - first);
    std::vector<int32_t> ids;
    {
      h5::Lock lock;
      check_unchanged(path_, identity_, path_identity(path_));
      h5::Id file = h5::open_file_readonly(path_);
      h5::Id dapl(H5Pcreate(H5P_DATASET_ACCESS), H5Pclose);
      H5Pset_chunk_cache(dapl.get(), 0, 0, 1.0);
      h5::Id ds(H5Dopen2(file.get(), kTokenIdsDataset, dapl.get()), H5Dclose);
      TUPE_CHECK(ds.valid(), path_ << ": dataset '" << kTokenIdsDataset << "': cannot open: " << h5::error_text());
      h5::read_integer_rows(path_, ds.get(), kTokenIdsDataset, static_cast<hsize_t>(first), static_cast<hsize_t>(n), ids);
    }
    // Ids are checked per sample in read(), after the sample's checksum; here only those that
    // would not survive the block's compact storage (uint16 for vocabularies up to 65536).
    if (vocab_ <= 65536)
      for (int64_t k = 0; k < n; ++k)
        if (ids[static_cast<size_t>(k)] < 0 || ids[static_cast<size_t>(k)] > 65535)
          check_id(path_, ids[static_cast<size_t>(k)], vocab_, first + k);
    ShardContents c;
    c.path = path_;
    c.append_ids(ids.data(), n, vocab_ <= 65536);
    return c;
  }

  size_t token_bytes_;
};

/// NVIDIA shard: blocks of rows through the cache.
class NvidiaSource final : public CachedSource {
 public:
  NvidiaSource(const std::string& path, int64_t rows, int64_t block_rows, int64_t vocab_size,
               std::shared_ptr<BlockCache> cache, uint64_t key)
      : CachedSource(path, true, false, rows, block_rows, vocab_size, std::move(cache), key) {}

  void read(int64_t local, Sample& out) const override {
    const int64_t b = local / block_;
    const BlockCache::Block blk = block(b);
    const auto k = static_cast<size_t>(local - b * block_);
    const auto begin = static_cast<size_t>(blk->offsets[k]), end = static_cast<size_t>(blk->offsets[k + 1]);
    out.token_ids.resize(end - begin);
    if (!blk->ids16.empty())
      std::copy(blk->ids16.begin() + static_cast<std::ptrdiff_t>(begin), blk->ids16.begin() + static_cast<std::ptrdiff_t>(end),
                out.token_ids.begin());
    else
      std::copy(blk->ids32.begin() + static_cast<std::ptrdiff_t>(begin), blk->ids32.begin() + static_cast<std::ptrdiff_t>(end),
                out.token_ids.begin());
    out.segment_ids.assign(blk->segments.begin() + static_cast<std::ptrdiff_t>(begin),
                           blk->segments.begin() + static_cast<std::ptrdiff_t>(end));
    const auto mb = static_cast<std::ptrdiff_t>(blk->mask_offsets[k]), me = static_cast<std::ptrdiff_t>(blk->mask_offsets[k + 1]);
    out.masked_positions.assign(blk->mask_positions.begin() + mb, blk->mask_positions.begin() + me);
    out.masked_labels.assign(blk->mask_labels.begin() + mb, blk->mask_labels.begin() + me);
    out.next_sentence_label = blk->nsp[k];
  }

  /// Rows [b*R, min((b+1)*R, N)), read and checked (read_nvidia_rows).
  ShardContents load(int64_t b) const override {
    h5::Lock lock;
    check_unchanged(path_, identity_, path_identity(path_));
    const NvidiaShardFile f = open_nvidia_shard(path_, vocab_);
    TUPE_CHECK(f.rows == count_, path_ << ": changed since it was opened (" << count_ << " -> " << f.rows << " rows)");
    const int64_t first = b * block_;
    return read_nvidia_rows(f, first, std::min(block_, count_ - first));
  }
};

}  // namespace

std::unique_ptr<ShardSource> open_own_shard_on_demand(const std::string& path, const DatasetOptions& options,
                                                      ShardHeader& header, std::shared_ptr<BlockCache> cache,
                                                      uint64_t cache_key) {
  h5::Lock lock;
  h5::Id file = h5::open_file_readonly(path);
  header = read_shard_header(path, file.get());
  check_own_header(path, header, options);
  hsize_t t = 0, n = 0, n_ordinary = 0;
  size_t token_bytes = 0, other_bytes = 0;
  bool token_signed = false, other_signed = false;
  h5::Id tokens = open_1d(path, file.get(), kTokenIdsDataset, t, token_bytes, token_signed);
  h5::Id lengths = open_1d(path, file.get(), kSequenceLengthsDataset, n, other_bytes, other_signed);
  TUPE_CHECK(static_cast<int64_t>(n) == header.num_sequences,
             path << ": dataset '" << kSequenceLengthsDataset << "' has " << n
                  << " entries but attribute num_sequences is " << header.num_sequences);
  TUPE_CHECK(static_cast<int64_t>(t) == header.num_tokens, path << ": dataset '" << kTokenIdsDataset << "' has " << t
                                                                 << " entries but attribute num_tokens is "
                                                                 << header.num_tokens);
  h5::Id ordinary, checksums;
  if (header.format_version >= 2) {
    ordinary = open_1d(path, file.get(), kOrdinaryCountsDataset, n_ordinary, other_bytes, other_signed);
    TUPE_CHECK(n_ordinary == n, path << ": dataset '" << kOrdinaryCountsDataset << "' has " << n_ordinary
                                     << " entries but '" << kSequenceLengthsDataset << "' has " << n);
  }
  const bool verified = header.format_version >= kFirstVerifiedShardVersion;
  if (verified) {
    hsize_t n_checksums = 0;
    checksums = open_1d(path, file.get(), kSampleChecksumsDataset, n_checksums, other_bytes, other_signed);
    TUPE_CHECK(n_checksums == n, path << ": dataset '" << kSampleChecksumsDataset << "' has " << n_checksums
                                      << " entries but '" << kSequenceLengthsDataset << "' has " << n);
  }
  const h5::FileLayout layout = h5::file_layout(path, tokens.get(), kTokenIdsDataset, t);
  const bool direct = !layout.filtered && layout.little_endian && std::endian::native == std::endian::little &&
                      (token_bytes == 1 || token_bytes == 2 || token_bytes == 4);
  std::unique_ptr<ShardSource> source;
  SampleIndex* index = nullptr;
  if (direct) {
    auto s = std::make_unique<OwnDirectSource>(path, layout, token_signed, header.vocab_size, verified);
    index = &s->mutable_index();
    source = std::move(s);
  } else {
    const int64_t block = layout.chunk_elements ? static_cast<int64_t>(layout.chunk_elements) : int64_t{1} << 18;
    auto s = std::make_unique<OwnCachedSource>(path, static_cast<int64_t>(t), block, header.vocab_size, token_bytes,
                                               verified, cache, cache_key);
    index = &s->mutable_index();
    source = std::move(s);
  }
  // The index, streamed in bounded blocks: lengths, and the candidates stored (version 2)
  // or counted from the tokens (version 1).
  constexpr hsize_t kBlock = hsize_t{1} << 20;
  Stream<int32_t> length_stream(path, lengths.get(), kSequenceLengthsDataset, n, kBlock);
  std::unique_ptr<Stream<uint16_t>> ordinary_stream;
  std::unique_ptr<Stream<uint32_t>> checksum_stream;
  std::unique_ptr<Stream<int32_t>> token_stream;
  if (checksums.valid())
    checksum_stream = std::make_unique<Stream<uint32_t>>(path, checksums.get(), kSampleChecksumsDataset, n, kBlock);
  if (ordinary.valid())
    ordinary_stream = std::make_unique<Stream<uint16_t>>(path, ordinary.get(), kOrdinaryCountsDataset, n, kBlock);
  else
    token_stream = std::make_unique<Stream<int32_t>>(path, tokens.get(), kTokenIdsDataset, t, kBlock);
  std::vector<int32_t> sample;
  int64_t total = 0;
  for (hsize_t i = 0; i < n; ++i) {
    const int32_t len = length_stream.next();
    TUPE_CHECK(len >= 1 && len <= header.max_seq_len, path << ": dataset '" << kSequenceLengthsDataset << "' row " << i
                                                           << ": length " << len << " outside 1.." << header.max_seq_len);
    TUPE_CHECK(total + len <= static_cast<int64_t>(t), path << ": dataset '" << kSequenceLengthsDataset
                                                            << "' sums to more than the " << t << " tokens of '"
                                                            << kTokenIdsDataset << "'");
    int64_t candidates;
    if (ordinary_stream) {
      candidates = ordinary_stream->next();
      TUPE_CHECK(candidates <= len, path << ": dataset '" << kOrdinaryCountsDataset << "' row " << i << ": "
                                         << candidates << " exceeds the sequence's length " << len);
    } else {
      sample.resize(static_cast<size_t>(len));
      for (auto& id : sample) id = token_stream->next();
      candidates = count_ordinary(sample.data(), len, header.special);
    }
    index->add(len, candidates, 0, checksum_stream ? checksum_stream->next() : 0);
    total += len;
  }
  TUPE_CHECK(total == static_cast<int64_t>(t), path << ": dataset '" << kSequenceLengthsDataset << "' sums to " << total
                                                    << " tokens but dataset '" << kTokenIdsDataset << "' holds " << t);
  index->compact();
  return source;
}

std::unique_ptr<ShardSource> open_nvidia_shard_on_demand(const std::string& path, const DatasetOptions& options,
                                                         int64_t& max_seq_len, std::shared_ptr<BlockCache> cache,
                                                         uint64_t cache_key) {
  h5::Lock lock;
  const NvidiaShardFile f = open_nvidia_shard(path, options.vocab_size);
  max_seq_len = f.seq;
  // A block is one chunk of rows of input_ids (a miss then decompresses one chunk per
  // dataset), or about 2^18 ids when the shard is not chunked.
  const int64_t block_rows = std::clamp<int64_t>(f.chunk_rows > 0 ? f.chunk_rows : (int64_t{1} << 18) / f.seq, 16, 8192);
  auto source = std::make_unique<NvidiaSource>(path, f.rows, block_rows, options.vocab_size, cache, cache_key);
  for (int64_t first = 0; first < f.rows; first += block_rows) {
    const ShardContents c = read_nvidia_rows(f, first, std::min(block_rows, f.rows - first));
    for (int64_t k = 0; k < c.size(); ++k) {
      const auto ku = static_cast<size_t>(k);
      const int64_t b = c.offsets[ku], len = c.offsets[ku + 1] - b;
      const int64_t mb = c.mask_offsets[ku], masks = c.mask_offsets[ku + 1] - mb;
      std::vector<int32_t> ids(static_cast<size_t>(len));
      for (int64_t j = 0; j < len; ++j)
        ids[static_cast<size_t>(j)] = c.ids16.empty() ? c.ids32[static_cast<size_t>(b + j)] : c.ids16[static_cast<size_t>(b + j)];
      const int64_t candidates = count_ordinary(ids.data(), len, options.nvidia_special, c.mask_positions.data() + mb,
                                                c.mask_labels.data() + mb, masks);
      source->mutable_index().add(len, candidates, masks);
    }
  }
  source->mutable_index().compact();
  return source;
}

}  // namespace tupe::data_pipeline
