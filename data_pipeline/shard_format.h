// The project's own pre-training shard, format version 3 (versions 1 and 2 are still read).
//
// One HDF5 file per shard, named <split>-SSSSS-of-NNNNN.h5 (split = train | validation).
// Datasets (1-D, chunked, maximum shape unlimited; little-endian):
//   token_ids         [T]  uint8 | uint16 | int32, the smallest that holds ids < vocab_size:
//                          the packed sequences back to back, each [CLS] ... [SEP]
//   sequence_lengths  [N]  int32, tokens of each sequence (>= 3, <= max_seq_len);
//                          sequence i starts at sum(sequence_lengths[:i]); T = sum of all
//   ordinary_counts   [N]  uint16, tokens of each sequence that are not special ([PAD] [UNK]
//                          [CLS] [SEP] [MASK]): the masking candidates (version 2 on; version 1
//                          shards lack it and readers count it from token_ids at open)
//   sample_checksums  [N]  uint32 (version 3 on): CRC-32C (crc32c.h) of sequence i's record,
//                          the bytes of
//                            sequence_lengths[i]  as 4 little-endian bytes (int32),
//                            ordinary_counts[i]   as 2 little-endian bytes (uint16),
//                            its token ids as token_ids stores them (little-endian, the
//                            dataset's element width: tokens [b, b + L) are the stored bytes
//                            [b * w, (b + L) * w) of the dataset's data)
//                          so in Python: crc32c.crc32c(np.int32(L).tobytes() + np.uint16(o).tobytes()
//                          + f["token_ids"][b:b+L].astype("<u2").tobytes()) for a uint16 shard.
// Verification: every sample a reader hands out is checked against its checksum first (on
// demand: at each read, by pread or through the block cache; in memory: all at load), and a
// mismatch ends the run with "<file>: sample i (...): checksum mismatch: the shard is damaged
// or was changed after preprocessing; ...". Shards of versions 1 and 2 carry no checksums:
// they are read unverified, and open_pretrain_dataset says so once per data set in the log.
// Storage: the datasets are written unfiltered by default (preprocess.compression_level 0),
// so readers fetch a sample's tokens with one pread at its chunk's file address
// (H5Dget_chunk_info_by_coord) and the page cache is shared by the ranks of a node;
// shuffle + deflate (level 1..9) is still written on request and read through a bounded
// per-process cache of decompressed chunks (on_demand.h).
// Attributes of the root group (int64 scalars, float64 scalars, variable-length UTF-8 strings):
//   format = "tupe-pretrain-shard", format_version = 3
//   split, shard_index, num_shards           which file of which split this is
//   tokenizer_kind, vocab_size, vocab_sha256, lower_case (0/1)
//   pad_id, unk_id, cls_id, sep_id, mask_id   special token ids
//   max_seq_len, packing (full_sentences | document), documents (blank_line | line)
//   num_sequences (= N), num_tokens (= T)
//   command_line, seed, validation_ratio, piece_bytes   what produced the shard
//   split_rule (optional)                     document_text; absent in older shards: file_offset
//   run_id (optional)                         the run that wrote the set; all its shards agree
// No masks are stored: masking is dynamic, in the loader. Readers refuse other format names
// and versions above their own.
#pragma once
#include <hdf5.h>

#include <cstdint>
#include <string>

#include "data_pipeline/tokenizer.h"

namespace tupe::data_pipeline {

inline constexpr const char* kShardFormatName = "tupe-pretrain-shard";
inline constexpr int64_t kShardFormatVersion = 3;
inline constexpr const char* kTokenIdsDataset = "token_ids";
inline constexpr const char* kSequenceLengthsDataset = "sequence_lengths";
inline constexpr const char* kOrdinaryCountsDataset = "ordinary_counts";
inline constexpr const char* kSampleChecksumsDataset = "sample_checksums";
/// The first format version whose shards carry sample_checksums.
inline constexpr int64_t kFirstVerifiedShardVersion = 3;

/// Everything a shard records besides its datasets.
struct ShardHeader {
  int64_t format_version = kShardFormatVersion;  ///< 1 (no ordinary_counts), 2 (no checksums) or 3
  std::string split;            ///< "train" | "validation"
  int64_t shard_index = 0;      ///< S in <split>-S-of-N
  int64_t num_shards = 1;       ///< N
  std::string tokenizer_kind;   ///< "wordpiece" | "sentencepiece"
  int64_t vocab_size = 0;       ///< ids are in [0, vocab_size)
  std::string vocab_sha256;     ///< hex SHA-256 of the vocabulary file
  bool lower_case = true;       ///< text lower-cased before tokenisation
  SpecialTokens special;        ///< [PAD] [UNK] [CLS] [SEP] [MASK] ids
  int64_t max_seq_len = 128;    ///< longest sequence (tokens, [CLS] and [SEP] included)
  std::string packing;          ///< "full_sentences" | "document"
  std::string documents;        ///< "blank_line" | "line"
  int64_t num_sequences = 0;    ///< N sequences
  int64_t num_tokens = 0;       ///< T tokens
  std::string command_line;     ///< the producing command, arguments joined by spaces
  int64_t seed = 0;             ///< seed of the train/validation split
  double validation_ratio = 0;  ///< fraction of documents sent to validation
  int64_t piece_bytes = 0;      ///< stream size of the packing (bytes of input text)
  /// How documents were split (document_split.h): "document_text" (a keyed hash of the text),
  /// or "file_offset" for shards written before the attribute (file index, first byte).
  std::string split_rule = "file_offset";
  /// Identity of the preprocess run that wrote the set (hex digest of its inputs and
  /// settings, preprocess_run_id); "" in shards written before it was recorded.
  std::string run_id;
};

/// Smallest stored integer type of token ids for a vocabulary.
enum class TokenDtype { kUint8, kUint16, kInt32 };
/// uint8 for vocab_size <= 256, uint16 for <= 65536, else int32.
TokenDtype token_dtype_for_vocab(int64_t vocab_size);
/// HDF5 file type (little-endian) of a TokenDtype.
hid_t token_file_type(TokenDtype dtype);

/// Writes the header as root attributes of `file` (format name and version included).
void write_shard_header(const std::string& path, hid_t file, const ShardHeader& header);
/// Reads and checks the header: "<path>: not a tupe shard (attribute 'format' is X)",
/// "<path>: format version V is newer than this build reads (1)", missing attributes.
ShardHeader read_shard_header(const std::string& path, hid_t file);

/// CRC-32C of one sample's record (see above): `length` and `ordinary` as the index stores
/// them, then `bytes` bytes of its token ids exactly as stored in token_ids.
uint32_t sample_checksum(int64_t length, int64_t ordinary, const void* token_bytes, size_t bytes);
/// The same from decoded ids[0..n), each encoded as the `element_bytes` (1, 2 or 4)
/// little-endian bytes that token_ids stores (the compressed and in-memory readers).
uint32_t sample_checksum_of_ids(int64_t ordinary, const int32_t* ids, int64_t n, size_t element_bytes);
/// Throws tupe::Error "<path>: sample <sample> (tokens <b>..<b+L-1> of 'token_ids'): checksum
/// mismatch: the shard is damaged or was changed after preprocessing; <what to do>".
[[noreturn]] void fail_checksum_mismatch(const std::string& path, int64_t sample, int64_t token_begin, int64_t length);

/// "<split>-SSSSS-of-NNNNN.h5".
std::string shard_file_name(const std::string& split, int64_t shard_index, int64_t num_shards);

}  // namespace tupe::data_pipeline
