// Streaming writer of one project shard (shard_format.h). The file is written under a
// temporary name "<final>.tmp-<host>-<pid>" and renamed to its final name only by commit(), so an
// interrupted or failed run never leaves a half shard under a shard name; the destructor
// removes an uncommitted temporary file.
#pragma once
#include <cstdint>
#include <string>

#include "common/host_name.h"
#include <vector>

#include "data_pipeline/hdf5_util.h"
#include "data_pipeline/shard_format.h"
#include "data_pipeline/shard_set.h"

namespace tupe::data_pipeline {

struct ShardWriterOptions {
  int64_t compression_level = 0;       ///< deflate level 0..9 (0 = unfiltered: read by file offset)
  int64_t chunk_tokens = 1 << 18;      ///< chunk size of token_ids (elements)
  int64_t chunk_sequences = 1 << 15;   ///< chunk size of sequence_lengths (elements)
};

class ShardWriter {
 public:
  /// Creates the temporary file for `final_path`. `header` gives everything but the counts
  /// (filled by close()). Throws tupe::Error "<path>: cannot create (...)".
  ShardWriter(std::string final_path, ShardHeader header, ShardWriterOptions options = {});
  ~ShardWriter();
  ShardWriter(const ShardWriter&) = delete;
  ShardWriter& operator=(const ShardWriter&) = delete;

  /// Appends one sequence of `length` ids (3 <= length <= max_seq_len, ids < vocab_size;
  /// tupe::Error otherwise), with its masking-candidate count and checksum.
  void append(const int32_t* ids, int64_t length);
  /// Flushes, writes the header with num_sequences/num_tokens and closes the temporary file.
  void close();
  /// Renames the closed temporary file to the final name (atomic on one file system).
  void commit();

  const std::string& final_path() const { return final_path_; }
  /// The shard's split attribute ("train" | "validation"), as its header records it.
  const std::string& split() const { return header_.split; }
  const std::string& temp_path() const { return temp_path_; }
  int64_t num_sequences() const { return num_sequences_; }
  int64_t num_tokens() const { return num_tokens_; }

 private:
  void flush_locked();

  std::string final_path_, temp_path_;
  ShardHeader header_;
  ShardWriterOptions options_;
  h5::Id file_, token_ds_, length_ds_, ordinary_ds_, checksum_ds_;
  size_t token_bytes_ = 2;  // stored width of a token id (what its checksum covers)
  std::vector<int32_t> token_buf_, length_buf_;
  std::vector<uint16_t> ordinary_buf_;
  std::vector<uint32_t> checksum_buf_;
  int64_t tokens_written_ = 0, sequences_written_ = 0;
  int64_t num_sequences_ = 0, num_tokens_ = 0;
  bool closed_ = false, committed_ = false;
};

/// Removes the temporary shard files ("*.tmp-<host>-<pid>", and the older "*.tmp-<pid>")
/// in `folder` left by writers that died (killed preprocess runs): those of this host whose
/// process no longer exists; with `every_host`, every one but this process's, of any host (the
/// caller holds the folder's lock, common/folder_lock.h, and no rank of its job writes yet,
/// so no live writer can own them). Without it, files of other hosts are kept (their writers
/// cannot be probed from here) and returned in `kept`. Returns the removed paths.
std::vector<std::string> remove_stale_temp_shards(const std::string& folder, bool every_host,
                                                  std::vector<std::string>* kept = nullptr);

}  // namespace tupe::data_pipeline
