#include "data_pipeline/shard_writer.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <filesystem>

#include "common/error.h"

namespace tupe::data_pipeline {

namespace {

h5::Id create_dataset(const std::string& path, hid_t file, const char* name, hid_t file_type, int64_t chunk,
                      int64_t compression_level) {
  const hsize_t dims[1] = {0};
  const hsize_t maxdims[1] = {H5S_UNLIMITED};
  h5::Id space(H5Screate_simple(1, dims, maxdims), H5Sclose);
  h5::Id dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
  const hsize_t chunk_dims[1] = {static_cast<hsize_t>(chunk)};
  bool ok = H5Pset_chunk(dcpl.get(), 1, chunk_dims) >= 0;
  // No timestamps in object headers: the same input gives byte-identical files.
  ok = ok && H5Pset_obj_track_times(dcpl.get(), 0) >= 0;
  if (compression_level > 0) {
    ok = ok && H5Pset_shuffle(dcpl.get()) >= 0;
    ok = ok && H5Pset_deflate(dcpl.get(), static_cast<unsigned>(compression_level)) >= 0;
  }
  TUPE_CHECK(ok, path << ": dataset '" << name << "': cannot set chunking/compression: " << h5::error_text());
  h5::Id ds(H5Dcreate2(file, name, file_type, space.get(), H5P_DEFAULT, dcpl.get(), H5P_DEFAULT), H5Dclose);
  TUPE_CHECK(ds.valid(), path << ": cannot create dataset '" << name << "': " << h5::error_text());
  return ds;
}

template <class T>
void append_1d(const std::string& path, hid_t ds, const char* name, int64_t offset, const std::vector<T>& data) {
  if (data.empty()) return;
  const hsize_t new_size[1] = {static_cast<hsize_t>(offset) + data.size()};
  TUPE_CHECK(H5Dset_extent(ds, new_size) >= 0, path << ": dataset '" << name << "': cannot extend: " << h5::error_text());
  h5::Id fspace(H5Dget_space(ds), H5Sclose);
  const hsize_t start[1] = {static_cast<hsize_t>(offset)};
  const hsize_t count[1] = {data.size()};
  H5Sselect_hyperslab(fspace.get(), H5S_SELECT_SET, start, nullptr, count, nullptr);
  h5::Id mspace(H5Screate_simple(1, count, nullptr), H5Sclose);
  TUPE_CHECK(H5Dwrite(ds, h5::native_type<T>(), mspace.get(), fspace.get(), H5P_DEFAULT, data.data()) >= 0,
             path << ": dataset '" << name << "': write failed: " << h5::error_text());
}

void fsync_path(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

}  // namespace

ShardWriter::ShardWriter(std::string final_path, ShardHeader header, ShardWriterOptions options)
    : final_path_(std::move(final_path)), header_(std::move(header)), options_(options) {
  TUPE_CHECK(options_.compression_level >= 0 && options_.compression_level <= 9,
             "preprocess.compression_level: must be in 0..9, got " << options_.compression_level);
  TUPE_CHECK(options_.chunk_tokens > 0 && options_.chunk_sequences > 0, final_path_ << ": chunk sizes must be positive");
  temp_path_ = final_path_ + ".tmp-" + host_name() + "-" + std::to_string(::getpid());
  h5::Lock lock;
  h5::Id fcpl(H5Pcreate(H5P_FILE_CREATE), H5Pclose);
  H5Pset_obj_track_times(fcpl.get(), 0);  // no timestamp on the root group either
  file_ = h5::Id(H5Fcreate(temp_path_.c_str(), H5F_ACC_TRUNC, fcpl.get(), H5P_DEFAULT), H5Fclose);
  TUPE_CHECK(file_.valid(), temp_path_ << ": cannot create (" << h5::error_text() << ")");
  const hid_t token_type = token_file_type(token_dtype_for_vocab(header_.vocab_size));
  token_bytes_ = H5Tget_size(token_type);
  token_ds_ = create_dataset(temp_path_, file_.get(), kTokenIdsDataset, token_type, options_.chunk_tokens,
                             options_.compression_level);
  length_ds_ = create_dataset(temp_path_, file_.get(), kSequenceLengthsDataset, H5T_STD_I32LE,
                              options_.chunk_sequences, options_.compression_level);
  ordinary_ds_ = create_dataset(temp_path_, file_.get(), kOrdinaryCountsDataset, H5T_STD_U16LE,
                                options_.chunk_sequences, options_.compression_level);
  checksum_ds_ = create_dataset(temp_path_, file_.get(), kSampleChecksumsDataset, H5T_STD_U32LE,
                                options_.chunk_sequences, options_.compression_level);
  token_buf_.reserve(static_cast<size_t>(options_.chunk_tokens));
}

ShardWriter::~ShardWriter() {
  if (committed_) return;
  {
    h5::Lock lock;
    checksum_ds_.reset();
    ordinary_ds_.reset();
    length_ds_.reset();
    token_ds_.reset();
    file_.reset();
  }
  std::error_code ec;
  std::filesystem::remove(temp_path_, ec);
}

void ShardWriter::append(const int32_t* ids, int64_t length) {
  TUPE_CHECK(!closed_, temp_path_ << ": append after close");
  TUPE_CHECK(length >= 3 && length <= header_.max_seq_len,
             temp_path_ << ": sequence " << num_sequences_ << " has " << length << " tokens, expected 3.."
                        << header_.max_seq_len);
  for (int64_t i = 0; i < length; ++i)
    TUPE_CHECK(ids[i] >= 0 && ids[i] < header_.vocab_size,
               temp_path_ << ": sequence " << num_sequences_ << " position " << i << ": id " << ids[i]
                          << " is outside the vocabulary of size " << header_.vocab_size);
  token_buf_.insert(token_buf_.end(), ids, ids + length);
  length_buf_.push_back(static_cast<int32_t>(length));
  const int64_t ordinary = count_ordinary(ids, length, header_.special);
  ordinary_buf_.push_back(static_cast<uint16_t>(ordinary));
  checksum_buf_.push_back(sample_checksum_of_ids(ordinary, ids, length, token_bytes_));
  ++num_sequences_;
  num_tokens_ += length;
  if (static_cast<int64_t>(token_buf_.size()) >= options_.chunk_tokens ||
      static_cast<int64_t>(length_buf_.size()) >= options_.chunk_sequences) {
    h5::Lock lock;
    flush_locked();
  }
}

void ShardWriter::flush_locked() {
  append_1d(temp_path_, token_ds_.get(), kTokenIdsDataset, tokens_written_, token_buf_);
  tokens_written_ += static_cast<int64_t>(token_buf_.size());
  token_buf_.clear();
  append_1d(temp_path_, length_ds_.get(), kSequenceLengthsDataset, sequences_written_, length_buf_);
  append_1d(temp_path_, ordinary_ds_.get(), kOrdinaryCountsDataset, sequences_written_, ordinary_buf_);
  append_1d(temp_path_, checksum_ds_.get(), kSampleChecksumsDataset, sequences_written_, checksum_buf_);
  sequences_written_ += static_cast<int64_t>(length_buf_.size());
  length_buf_.clear();
  ordinary_buf_.clear();
  checksum_buf_.clear();
}

void ShardWriter::close() {
  if (closed_) return;
  h5::Lock lock;
  flush_locked();
  header_.num_sequences = num_sequences_;
  header_.num_tokens = num_tokens_;
  write_shard_header(temp_path_, file_.get(), header_);
  // Every identifier is closed whatever fails (no short-circuit): an object left open after
  // a write error (a full disk) would be flushed again by HDF5 at exit.
  bool ok = checksum_ds_.reset();
  ok = ordinary_ds_.reset() && ok;
  ok = length_ds_.reset() && ok;
  ok = token_ds_.reset() && ok;
  ok = H5Fflush(file_.get(), H5F_SCOPE_GLOBAL) >= 0 && ok;
  ok = file_.reset() && ok;
  TUPE_CHECK(ok, temp_path_ << ": cannot finish writing (" << h5::error_text() << ")");
  closed_ = true;
}

void ShardWriter::commit() {
  TUPE_CHECK(closed_, temp_path_ << ": commit before close");
  if (committed_) return;
  fsync_path(temp_path_);
  std::error_code ec;
  std::filesystem::rename(temp_path_, final_path_, ec);
  TUPE_CHECK(!ec, final_path_ << ": cannot rename from " << temp_path_ << " (" << ec.message() << ")");
  committed_ = true;
  fsync_path(std::filesystem::path(final_path_).parent_path().string());
}

std::vector<std::string> remove_stale_temp_shards(const std::string& folder, bool every_host,
                                                  std::vector<std::string>* kept) {
  std::vector<std::string> removed;
  std::error_code ec;
  if (!std::filesystem::is_directory(folder, ec)) return removed;
  const std::string host = host_name();
  for (const auto& e : std::filesystem::directory_iterator(folder, ec)) {
    const std::string name = e.path().filename().string();
    const size_t tmp = name.rfind(".h5.tmp-");
    if (tmp == std::string::npos || !e.is_regular_file()) continue;
    const std::string tail = name.substr(tmp + 8);  // "<host>-<pid>" or "<pid>"
    const size_t dash = tail.rfind('-');
    const std::string writer_host = dash == std::string::npos ? host : tail.substr(0, dash);
    const std::string pid_text = dash == std::string::npos ? tail : tail.substr(dash + 1);
    if (pid_text.empty() || pid_text.find_first_not_of("0123456789") != std::string::npos || pid_text.size() > 9)
      continue;  // not one of ours
    const auto pid = static_cast<pid_t>(std::stol(pid_text));
    // With every_host no live writer can own it (see shard_writer.h), whatever its pid says: a
    // killed job's ranks may linger as zombies that kill(pid, 0) still finds.
    const bool dead = pid != ::getpid() &&
                      (every_host || (writer_host == host && ::kill(pid, 0) != 0 && errno == ESRCH));
    if (!dead) {
      if (kept && writer_host != host) kept->push_back(e.path().string());
      continue;
    }
    std::error_code rm;
    if (std::filesystem::remove(e.path(), rm)) removed.push_back(e.path().string());
  }
  return removed;
}

}  // namespace tupe::data_pipeline
