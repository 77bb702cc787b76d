// Readers of single shard files into memory (open_pretrain_dataset with in_memory, dataset.h;
// the on-demand readers are in on_demand.h).
// Each holds the HDF5 lock while it reads and checks everything it reads; errors are one
// line "<file>: <place>: <cause>".
#pragma once
#include <string>
#include <vector>

#include "data_pipeline/dataset.h"
#include "data_pipeline/hdf5_util.h"
#include "data_pipeline/shard_format.h"
#include "data_pipeline/shard_set.h"

namespace tupe::data_pipeline {

/// "tupe" when the file's root has attribute 'format', else "nvidia" (whose reader then
/// names any missing dataset). Throws when the file cannot be opened as HDF5.
std::string detect_shard_format(const std::string& path);

/// Checks an own shard's header against `options` (expected vocabulary hash and size) and
/// the format's limits; throws "<path>: vocabulary SHA-256 ... differs from the expected ...".
void check_own_header(const std::string& path, const ShardHeader& header, const DatasetOptions& options);

/// The preprocess run a shard belongs to: its split, shard count and recorded run_id, or
/// (shards written before run ids) what the run was made of.
std::string shard_run_key(const ShardHeader& header);

/// Every preprocess run's shards in `files` (headers[i] is files[i]'s) must form its whole
/// set: indexes 0..N-1 each exactly once; sets of different runs may be combined, each
/// complete. One line per finding: "<file>: incomplete shard set: K of the N train shards of
/// its preprocess run are missing (names)[; the listed shards come from R different
/// preprocess runs]", "<file>: train shard S of N is listed twice (also <file>)", an index
/// or count out of range. Empty when the sets are whole (open_pretrain_dataset throws the first).
std::vector<std::string> shard_set_problems(const std::vector<std::string>& files,
                                            const std::vector<ShardHeader>& headers);

/// "" when shard `path` agrees with `first_path` on vocabulary (hash and size), special
/// token ids and max_seq_len; else one line naming the first difference.
std::string shard_header_mismatch(const std::string& path, const ShardHeader& header, const std::string& first_path,
                                  const ShardHeader& first);

/// Every shard file of `paths` (files as given; folders: every *.h5 / *.hdf5 / *.hdf file,
/// both splits, sorted by name). Throws for a missing path or a folder without shards.
std::vector<std::string> list_all_shard_files(const std::vector<std::string>& paths);

/// Reads one own shard (shard_format.h). Checks: format/version, expected vocabulary hash,
/// vocab size, dtypes, sum(sequence_lengths) == len(token_ids), counts == attributes,
/// 1 <= length <= max_seq_len, every sample's checksum (version 3 on; "<path>: sample i
/// (...): checksum mismatch: ..."), stored candidate counts, ids < vocab_size. `header`
/// receives the shard's header.
ShardContents read_own_shard(const std::string& path, const DatasetOptions& options, ShardHeader& header);

/// An NVIDIA shard opened for reading rows: its six datasets checked for presence, integer
/// dtypes, agreeing shapes and readable storage (no row is read). Holds HDF5 identifiers:
/// make, use and destroy it under h5::Lock. Throws like read_nvidia_shard.
struct NvidiaShardFile {
  std::string path;
  h5::Id file, ids, mask, segments, positions, labels, nsp;
  int64_t rows = 0;        ///< N samples
  int64_t seq = 0;         ///< L: columns of input_ids (the shard's max_seq_len)
  int64_t pred = 0;        ///< P: columns of masked_lm_positions
  int64_t vocab_size = 0;  ///< ids are checked against it
  int64_t chunk_rows = 0;  ///< rows per chunk of input_ids (0 = not chunked)
};
NvidiaShardFile open_nvidia_shard(const std::string& path, int64_t vocab_size);

/// Reads and checks rows [row_begin, row_begin + rows) of an open NVIDIA shard (the checks of
/// read_nvidia_shard; messages name the file's row numbers). Caller holds h5::Lock.
ShardContents read_nvidia_rows(const NvidiaShardFile& f, int64_t row_begin, int64_t rows);

/// Reads one NVIDIA BERT shard (docs/formats.md "NVIDIA DeepLearningExamples BERT shards"; any integer dtypes). Checks: all six
/// datasets present with integer dtypes; [N, L] / [N, P] / [N] shapes agree; input_mask is
/// ones then zeros; masked positions ascending inside the real tokens (the first 0 ends the
/// list); ids < options.vocab_size. `max_seq_len` receives L.
ShardContents read_nvidia_shard(const std::string& path, const DatasetOptions& options, int64_t& max_seq_len);

}  // namespace tupe::data_pipeline
