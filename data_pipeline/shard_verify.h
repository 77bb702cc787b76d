// The check of a shard set before a run (`tupe verify --shards`, data.verify_at_start): is the
// set whole, is every file what its header says, does every sample match its checksum?
// Built from the readers' own code: open_own_shard_on_demand (header, dataset shapes and
// counts against the recorded num_sequences / num_tokens, chunk storage inside the file),
// ShardSource::scan (every sample against its stored CRC-32C, shard_format.h, then its ids
// against the vocabulary), shard_set_problems and shard_header_mismatch (shard_readers.h).
// No MPI here: the ranks' verdicts travel through a caller-given all-gather of strings.
//
// Lines (one per finding, in file order; then the set's findings):
//   "<file>: K of N samples fail their check; the first: sample i (tokens a..b of 'token_ids'):
//    checksum mismatch: ..."                                  damaged samples
//   "<file>: <the reader's one-line error>"                    unreadable header or datasets
//   "<file>: incomplete shard set: ..."                        a shard missing, or of another run
//   "<file>: vocabulary (...) differs from <first>'s (...)"    files that do not belong together
// and the summary "verify: F shard files, S samples: D damaged files, P set problems" (or
// "...: whole; every sample matches its checksum").
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "data_pipeline/shard_format.h"

namespace tupe::data_pipeline {

/// What checking one file found.
struct ShardVerdict {
  std::string path;
  int64_t file_bytes = 0;
  std::string format;          ///< "tupe" | "nvidia" | "" (not readable)
  bool readable = false;       ///< header and datasets opened (header valid for the set check)
  std::string problem;         ///< the file's line ("" = good)
  int64_t samples = 0;         ///< samples checked
  int64_t bad_samples = 0;     ///< of them, damaged
  bool verified = false;       ///< samples carry checksums (own shards of format version 3 on)
  ShardHeader header;          ///< own shards, when readable

  /// The verdict as one byte string (for the ranks' all-gather) and back.
  std::string encode() const;
  static ShardVerdict decode(const std::string& bytes);
};

/// Checks one shard file (own or NVIDIA): opens it as the on-demand readers do, then scans
/// every sample in blocks of about `block_bytes`. Never throws for a damaged file: the
/// problem is in the verdict.
ShardVerdict verify_shard_file(const std::string& path, int64_t block_bytes = int64_t{16} << 20);

/// What the whole set's check found.
struct VerifyReport {
  std::vector<std::string> lines;  ///< one per damaged file (file order), then the set's findings
  std::string summary;             ///< "verify: ..." (see above)
  int64_t files = 0, samples = 0, file_bytes = 0;
  int64_t damaged_files = 0, set_problems = 0;
  int64_t unverified_files = 0;    ///< NVIDIA shards and own shards before format version 3
  bool damaged() const { return !lines.empty(); }
};

/// The report over every file's verdict (`verdicts` in `files` order).
VerifyReport make_verify_report(const std::vector<std::string>& files, const std::vector<ShardVerdict>& verdicts);

/// Every rank's string, in rank order, on every rank (collective).
using GatherStrings = std::function<std::vector<std::string>(const std::string& mine)>;

/// The check of `files` over the ranks: rank `rank` of `world` checks files i with
/// i % world == rank; the verdicts are gathered with `gather`, and every rank returns the
/// same report. Collective (every rank passes the same files).
VerifyReport verify_shard_set(const std::vector<std::string>& files, int rank, int world, const GatherStrings& gather);

}  // namespace tupe::data_pipeline
