// The on-demand source of own shards whose token_ids are unfiltered and little-endian
// (on_demand.h): one pread per chunk run at the chunk's file address, no HDF5 call after open.
// Internal to on_demand_sources.cpp (the one file that includes it), in a header of its own
// so that each file stays short.
#pragma once
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "common/error.h"
#include "data_pipeline/hdf5_util.h"
#include "data_pipeline/on_demand.h"

namespace tupe::data_pipeline::detail {

/// Throws "<path>: dataset 'token_ids' element <element>: id <id> outside the vocabulary of
/// size <vocab>" unless 0 <= id < vocab.
inline void check_id(const std::string& path, int64_t id, int64_t vocab, int64_t element) {
  TUPE_CHECK(id >= 0 && id < vocab, path << ": dataset '" << kTokenIdsDataset << "' element " << element << ": id "
                                         << id << " outside the vocabulary of size " << vocab);
}

/// Own shard, unfiltered little-endian token_ids: pread at the chunks' file addresses.
class OwnDirectSource final : public ShardSource {
 public:
  OwnDirectSource(const std::string& path, h5::FileLayout layout, bool is_signed, int64_t vocab_size, bool verified)
      : ShardSource(path, false, verified), layout_(std::move(layout)), signed_(is_signed), vocab_(vocab_size) {
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    TUPE_CHECK(fd_ >= 0, path << ": cannot open for reading (" << std::strerror(errno)
                              << (errno == EMFILE ? "; raise `ulimit -n`" : "") << ")");
    identity_ = file_identity(path, fd_);
  }
  ~OwnDirectSource() override {
    if (fd_ >= 0) ::close(fd_);
  }
  SampleIndex& mutable_index() { return index_; }

  void prefetch(int64_t local) const override {
    const int64_t begin = index_.begin(local), n = index_.length(local);
    const auto eb = static_cast<int64_t>(layout_.element_bytes);
    const auto chunk = static_cast<int64_t>(layout_.chunk_elements);
    for (int64_t pos = begin; pos < begin + n;) {
      const int64_t c = chunk ? pos / chunk : 0;
      const int64_t within = chunk ? pos % chunk : pos;
      const int64_t take = chunk ? std::min(begin + n - pos, chunk - within) : begin + n - pos;
      ::posix_fadvise(fd_, static_cast<off_t>(layout_.addresses[static_cast<size_t>(c)] + within * eb),
                      static_cast<off_t>(take * eb), POSIX_FADV_WILLNEED);
      pos += take;
    }
  }

  /// token_ids front to back in runs of about `block_bytes` (adjacent chunks in one pread),
  /// each whole sample checked as read() checks it (checksum, then ids).
  ScanResult scan(int64_t block_bytes) const override {
    check_unchanged(path_, identity_, file_identity(path_, fd_));
    ::posix_fadvise(fd_, 0, 0, POSIX_FADV_SEQUENTIAL);
    ScanResult r;
    const auto eb = static_cast<int64_t>(layout_.element_bytes);
    const auto chunk = static_cast<int64_t>(layout_.chunk_elements);
    const int64_t total = index_.tokens(), n = index_.size();
    const int64_t block_tokens = std::max<int64_t>(block_bytes / eb, 65536);
    std::vector<unsigned char> buf;
    int64_t buf_first = 0;  // token at buf[0]
    int64_t pos = 0;        // next token to read
    int64_t sample = 0, sample_begin = 0;
    while (sample < n) {
      // Drop the samples checked, keep the partial one, append the next run.
      const int64_t keep_from = sample_begin - buf_first;
      buf.erase(buf.begin(), buf.begin() + keep_from * eb);
      buf_first = sample_begin;
      const int64_t m = std::min(block_tokens, total - pos);
      TUPE_CHECK(m > 0, path_ << ": sample " << sample << " runs past the end of '" << kTokenIdsDataset << "' (internal)");
      const size_t at = buf.size();
      buf.resize(at + static_cast<size_t>(m * eb));
      int64_t run_offset = -1, run_bytes = 0;
      unsigned char* run_dst = nullptr;
      for (int64_t p = pos; p < pos + m;) {
        const int64_t c = chunk ? p / chunk : 0;
        const int64_t within = chunk ? p % chunk : p;
        const int64_t take = chunk ? std::min(pos + m - p, chunk - within) : pos + m - p;
        const int64_t offset = layout_.addresses[static_cast<size_t>(c)] + within * eb;
        if (run_offset >= 0 && run_offset + run_bytes == offset) {
          run_bytes += take * eb;  // the chunk follows the run in the file
        } else {
          if (run_offset >= 0) pread_fully(run_dst, run_bytes, run_offset);
          run_offset = offset;
          run_bytes = take * eb;
          run_dst = buf.data() + at + (p - pos) * eb;
        }
        p += take;
      }
      if (run_offset >= 0) pread_fully(run_dst, run_bytes, run_offset);
      r.bytes_read += m * eb;
      pos += m;
      for (; sample < n && sample_begin + index_.length(sample) <= pos; ++sample) {
        const int64_t len = index_.length(sample);
        const unsigned char* bytes = buf.data() + (sample_begin - buf_first) * eb;
        std::string problem;
        if (index_.verified() &&
            sample_checksum(len, index_.ordinary(sample), bytes, static_cast<size_t>(len * eb)) != index_.checksum(sample)) {
          try {
            fail_checksum_mismatch(path_, sample, sample_begin, len);
          } catch (const Error& e) {
            problem = e.what();
          }
        } else if (const int64_t k = first_outside(bytes, len); k >= 0) {
          try {
            check_id(path_, id_at(bytes + k * eb), vocab_, sample_begin + k);
          } catch (const Error& e) {
            problem = e.what();
          }
        }
        if (!problem.empty() && r.bad++ == 0) {
          r.first_bad = sample;
          r.first_problem = problem;
        }
        ++r.samples;
        sample_begin += len;
      }
    }
    bytes_read_.fetch_add(r.bytes_read, std::memory_order_relaxed);
    check_unchanged(path_, identity_, file_identity(path_, fd_));
    return r;
  }

  void read(int64_t local, Sample& out) const override {
    check_unchanged(path_, identity_, file_identity(path_, fd_));
    const int64_t begin = index_.begin(local), n = index_.length(local);
    const auto eb = static_cast<int64_t>(layout_.element_bytes);
    thread_local std::vector<unsigned char> buf;
    buf.resize(static_cast<size_t>(n * eb));
    const auto chunk = static_cast<int64_t>(layout_.chunk_elements);
    for (int64_t pos = begin; pos < begin + n;) {
      const int64_t c = chunk ? pos / chunk : 0;
      const int64_t within = chunk ? pos % chunk : pos;
      const int64_t take = chunk ? std::min(begin + n - pos, chunk - within) : begin + n - pos;
      pread_fully(buf.data() + (pos - begin) * eb, take * eb, layout_.addresses[static_cast<size_t>(c)] + within * eb);
      pos += take;
    }
    bytes_read_.fetch_add(n * eb, std::memory_order_relaxed);
    // The bytes as stored are checked before any id is taken from them.
    if (index_.verified() &&
        sample_checksum(n, index_.ordinary(local), buf.data(), static_cast<size_t>(n * eb)) != index_.checksum(local))
      fail_checksum_mismatch(path_, local, begin, n);
    out.token_ids.resize(static_cast<size_t>(n));
    bool outside = false;
    if (eb == 1)
      outside = signed_ ? decode<int8_t>(buf.data(), n, out.token_ids.data())
                        : decode<uint8_t>(buf.data(), n, out.token_ids.data());
    else if (eb == 2)
      outside = signed_ ? decode<int16_t>(buf.data(), n, out.token_ids.data())
                        : decode<uint16_t>(buf.data(), n, out.token_ids.data());
    else
      outside = signed_ ? decode<int32_t>(buf.data(), n, out.token_ids.data())
                        : decode<uint32_t>(buf.data(), n, out.token_ids.data());
    if (outside) {  // name the first id outside the vocabulary
      for (int64_t k = 0; k < n; ++k) {
        const unsigned char* p = buf.data() + k * eb;
        int64_t id = 0;
        if (eb == 1) id = signed_ ? static_cast<int8_t>(*p) : *p;
        if (eb == 2) id = signed_ ? static_cast<int16_t>(load<uint16_t>(p)) : load<uint16_t>(p);
        if (eb == 4) id = signed_ ? static_cast<int32_t>(load<uint32_t>(p)) : static_cast<int64_t>(load<uint32_t>(p));
        check_id(path_, id, vocab_, begin + k);
      }
    }
    out.segment_ids.clear();
    out.masked_positions.clear();
    out.masked_labels.clear();
    out.next_sentence_label = -1;
  }

 private:
  template <class T>
  static T load(const unsigned char* p) {
    T v;
    std::memcpy(&v, p, sizeof v);
    return v;
  }
  /// The stored id at `p` (the dataset's width and sign).
  int64_t id_at(const unsigned char* p) const {
    const auto eb = layout_.element_bytes;
    if (eb == 1) return signed_ ? static_cast<int8_t>(*p) : *p;
    if (eb == 2) return signed_ ? static_cast<int16_t>(load<uint16_t>(p)) : load<uint16_t>(p);
    return signed_ ? static_cast<int32_t>(load<uint32_t>(p)) : static_cast<int64_t>(load<uint32_t>(p));
  }
  /// Position of the first of the n stored ids at `src` outside [0, vocab_), or -1.
  int64_t first_outside(const unsigned char* src, int64_t n) const {
    const auto eb = static_cast<int64_t>(layout_.element_bytes);
    bool outside = false;  // a branch-free pass first (vectorised), the position only when needed
    if (eb == 1) outside = signed_ ? any_outside<int8_t>(src, n) : any_outside<uint8_t>(src, n);
    else if (eb == 2) outside = signed_ ? any_outside<int16_t>(src, n) : any_outside<uint16_t>(src, n);
    else outside = signed_ ? any_outside<int32_t>(src, n) : any_outside<uint32_t>(src, n);
    if (!outside) return -1;
    for (int64_t k = 0; k < n; ++k) {
      const int64_t id = id_at(src + k * eb);
      if (id < 0 || id >= vocab_) return k;
    }
    return -1;
  }
  /// Whether any of the n stored T at `src` lies outside [0, vocab_): their minimum and
  /// maximum in T, a loop the compiler vectorises.
  template <class T>
  bool any_outside(const unsigned char* src, int64_t n) const {
    if (n <= 0) return false;
    T lo = load<T>(src), hi = lo;
    for (int64_t k = 1; k < n; ++k) {
      const T v = load<T>(src + k * static_cast<int64_t>(sizeof(T)));
      lo = v < lo ? v : lo;
      hi = v > hi ? v : hi;
    }
    return static_cast<int64_t>(lo) < 0 || static_cast<int64_t>(hi) >= vocab_;
  }
  /// ids[0..n) stored as little-endian T at `src` into `dst`; returns whether any lies
  /// outside [0, vocab_).
  template <class T>
  bool decode(const unsigned char* src, int64_t n, int32_t* dst) const {
    bool outside = false;
    for (int64_t k = 0; k < n; ++k) {
      const auto id = static_cast<int64_t>(load<T>(src + k * static_cast<int64_t>(sizeof(T))));
      outside |= id < 0 || id >= vocab_;
      dst[k] = static_cast<int32_t>(id);
    }
    return outside;
  }

  void pread_fully(unsigned char* dst, int64_t bytes, int64_t offset) const {
    while (bytes > 0) {
      const ssize_t got = ::pread(fd_, dst, static_cast<size_t>(bytes), static_cast<off_t>(offset));
      if (got < 0 && errno == EINTR) continue;
      TUPE_CHECK(got >= 0, path_ << ": read at byte " << offset << " failed (" << std::strerror(errno) << ")");
      TUPE_CHECK(got > 0, path_ << ": ends before byte " << offset + bytes
                                << ": truncated since it was opened; restart from the last checkpoint");
      dst += got;
      bytes -= got;
      offset += got;
    }
  }

  h5::FileLayout layout_;
  bool signed_;
  int64_t vocab_;
  int fd_ = -1;
  FileIdentity identity_;
};

}  // namespace tupe::data_pipeline::detail
