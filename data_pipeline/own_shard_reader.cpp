// Reader of the project's own shards (shard_format.h).
#include "common/error.h"
#include "common/fnv1a.h"
#include "data_pipeline/hdf5_util.h"
#include "data_pipeline/shard_readers.h"

namespace tupe::data_pipeline {

std::string detect_shard_format(const std::string& path) {
  h5::Lock lock;
  h5::Id file = h5::open_file_readonly(path);
  // By content, not by one attribute's absence: a damaged own shard must not be read as an
  // NVIDIA one (and then be refused for an unrelated reason).
  const htri_t has_format = H5Aexists(file.get(), "format");
  TUPE_CHECK(has_format >= 0, path << ": cannot read the file's root attributes (damaged): " << h5::error_text());
  if (has_format > 0) return "tupe";
  if (h5::has_dataset(file.get(), "input_ids")) return "nvidia";
  const bool looks_own = h5::has_dataset(file.get(), kTokenIdsDataset) ||
                         h5::has_dataset(file.get(), kSequenceLengthsDataset) ||
                         h5::has_attribute(file.get(), "num_sequences");
  TUPE_CHECK(!looks_own, path << ": a tupe shard without its 'format' attribute (damaged, or written by another "
                                 "tool); preprocess the text again");
  TUPE_FAIL(path << ": neither a tupe shard (no 'format' attribute) nor an NVIDIA BERT shard (no 'input_ids' "
                    "dataset)");
}

void check_own_header(const std::string& path, const ShardHeader& header, const DatasetOptions& options) {
  TUPE_CHECK(options.expected_vocab_sha256.empty() || header.vocab_sha256 == options.expected_vocab_sha256,
             path << ": vocabulary SHA-256 " << header.vocab_sha256 << " differs from the expected "
                  << options.expected_vocab_sha256 << " (shards made with another vocabulary)");
  TUPE_CHECK(options.vocab_size <= 0 || header.vocab_size == options.vocab_size,
             path << ": vocabulary size " << header.vocab_size << " differs from the expected " << options.vocab_size);
  TUPE_CHECK(header.max_seq_len <= 65535,
             path << ": attribute 'max_seq_len' = " << header.max_seq_len << " is above 65535");
}

ShardContents read_own_shard(const std::string& path, const DatasetOptions& options, ShardHeader& header) {
  std::vector<int32_t> ids, lengths, ordinary;
  std::vector<uint32_t> checksums;
  size_t token_bytes = 0;
  const bool verified = [&] {
    h5::Lock lock;
    h5::Id file = h5::open_file_readonly(path);
    header = read_shard_header(path, file.get());
    check_own_header(path, header, options);
    h5::read_integer_dataset(path, file.get(), kTokenIdsDataset, 1, ids);
    h5::read_integer_dataset(path, file.get(), kSequenceLengthsDataset, 1, lengths);
    if (header.format_version >= 2) h5::read_integer_dataset(path, file.get(), kOrdinaryCountsDataset, 1, ordinary);
    if (header.format_version < kFirstVerifiedShardVersion) return false;
    h5::read_integer_dataset(path, file.get(), kSampleChecksumsDataset, 1, checksums);
    h5::Id ds(H5Dopen2(file.get(), kTokenIdsDataset, H5P_DEFAULT), H5Dclose);
    h5::Id type(H5Dget_type(ds.get()), H5Tclose);
    token_bytes = H5Tget_size(type.get());
    TUPE_CHECK(token_bytes == 1 || token_bytes == 2 || token_bytes == 4, path << ": dataset '" << kTokenIdsDataset
                                                                              << "' stores " << token_bytes
                                                                              << "-byte ids, expected 1, 2 or 4");
    return true;
  }();
  const auto n = static_cast<int64_t>(lengths.size());
  const auto t = static_cast<int64_t>(ids.size());
  TUPE_CHECK(n == header.num_sequences, path << ": dataset '" << kSequenceLengthsDataset << "' has " << n
                                             << " entries but attribute num_sequences is " << header.num_sequences);
  TUPE_CHECK(t == header.num_tokens, path << ": dataset '" << kTokenIdsDataset << "' has " << t
                                          << " entries but attribute num_tokens is " << header.num_tokens);
  ShardContents c;
  c.path = path;
  c.offsets.reserve(static_cast<size_t>(n) + 1);
  int64_t total = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int32_t len = lengths[static_cast<size_t>(i)];
    TUPE_CHECK(len >= 1 && len <= header.max_seq_len, path << ": dataset '" << kSequenceLengthsDataset << "' row " << i
                                                           << ": length " << len << " outside 1.." << header.max_seq_len);
    total += len;
    c.offsets.push_back(total);
  }
  TUPE_CHECK(total == t, path << ": dataset '" << kSequenceLengthsDataset << "' sums to " << total
                              << " tokens but dataset '" << kTokenIdsDataset << "' holds " << t);
  // Version 2 stores each sequence's masking candidates; they must be what the ids say.
  TUPE_CHECK(header.format_version < 2 || static_cast<int64_t>(ordinary.size()) == n,
             path << ": dataset '" << kOrdinaryCountsDataset << "' has " << ordinary.size() << " entries, expected " << n);
  // Version 3: every sample against its checksum, before anything else is taken from the ids.
  TUPE_CHECK(!verified || static_cast<int64_t>(checksums.size()) == n, path << ": dataset '" << kSampleChecksumsDataset
                                                                            << "' has " << checksums.size()
                                                                            << " entries, expected " << n);
  for (int64_t i = 0; verified && i < n; ++i) {
    const auto iu = static_cast<size_t>(i);
    const int64_t b = c.offsets[iu], len = c.offsets[iu + 1] - b;
    if (sample_checksum_of_ids(ordinary[iu], ids.data() + b, len, token_bytes) != checksums[iu])
      fail_checksum_mismatch(path, i, b, len);
  }
  if (verified) {
    uint64_t h = kFnv1a64Basis;
    for (const uint32_t v : checksums) {
      const char bytes[4] = {static_cast<char>(v & 0xff), static_cast<char>((v >> 8) & 0xff),
                             static_cast<char>((v >> 16) & 0xff), static_cast<char>((v >> 24) & 0xff)};
      h = fnv1a_64(std::string_view(bytes, 4), h);
    }
    c.checksums_hash = h;
  }
  for (int64_t i = 0; header.format_version >= 2 && i < n; ++i) {
    const int64_t b = c.offsets[static_cast<size_t>(i)];
    const int64_t want = count_ordinary(ids.data() + b, c.offsets[static_cast<size_t>(i) + 1] - b, header.special);
    TUPE_CHECK(ordinary[static_cast<size_t>(i)] == want, path << ": dataset '" << kOrdinaryCountsDataset << "' row " << i
                                                              << ": " << ordinary[static_cast<size_t>(i)]
                                                              << ", but the sequence has " << want
                                                              << " non-special tokens");
  }
  for (int64_t k = 0; k < t; ++k) {
    const int32_t id = ids[static_cast<size_t>(k)];
    TUPE_CHECK(id >= 0 && id < header.vocab_size, path << ": dataset '" << kTokenIdsDataset << "' element " << k
                                                       << ": id " << id << " outside the vocabulary of size "
                                                       << header.vocab_size);
  }
  if (header.vocab_size <= 65536) {
    c.ids16.assign(ids.begin(), ids.end());
  } else {
    c.ids32 = std::move(ids);
  }
  return c;
}

}  // namespace tupe::data_pipeline
