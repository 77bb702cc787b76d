// The project's own pre-training shard (FORMATS.md section 2), version 2 (1 is still read).
//
// One HDF5 file per shard, named <split>-SSSSS-of-NNNNN.h5 (split = train | validation).
// Datasets (1-D, chunked, maximum shape unlimited; little-endian):
//   token_ids         [T]  uint8 | uint16 | int32, the smallest that holds ids < vocab_size:
//                          the packed sequences back to back, each [CLS] ... [SEP]
//   sequence_lengths  [N]  int32, tokens of each sequence (>= 3, <= max_seq_len);
//                          sequence i starts at sum(sequence_lengths[:i]); T = sum of all
//   ordinary_counts   [N]  uint16, tokens of each sequence that are not special ([PAD] [UNK]
//                          [CLS] [SEP] [MASK]): the masking candidates (version 2; version 1
//                          shards lack it and readers count it from token_ids at open)
// Storage: version 2 writes the datasets unfiltered by default (preprocess.compression_level
// 0), so readers fetch a sample's tokens with one pread at its chunk's file address
// (H5Dget_chunk_info_by_coord) and the page cache is shared by the ranks of a node;
// shuffle + deflate (level 1..9) is still written on request and read through a bounded
// per-process cache of decompressed chunks (on_demand.h).
// Attributes of the root group (int64 scalars, float64 scalars, variable-length UTF-8 strings):
//   format = "tupe-pretrain-shard", format_version = 2
//   split, shard_index, num_shards           which file of which split this is
//   tokenizer_kind, vocab_size, vocab_sha256, lower_case (0/1)
//   pad_id, unk_id, cls_id, sep_id, mask_id   special token ids
//   max_seq_len, packing (full_sentences | document), documents (blank_line | line)
//   num_sequences (= N), num_tokens (= T)
//   command_line, seed, validation_ratio, piece_bytes   what produced the shard
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
inline constexpr int64_t kShardFormatVersion = 2;
inline constexpr const char* kTokenIdsDataset = "token_ids";
inline constexpr const char* kSequenceLengthsDataset = "sequence_lengths";
inline constexpr const char* kOrdinaryCountsDataset = "ordinary_counts";

/// Everything a shard records besides its datasets.
struct ShardHeader {
  int64_t format_version = kShardFormatVersion;  ///< 1 (no ordinary_counts) or 2
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

/// "<split>-SSSSS-of-NNNNN.h5".
std::string shard_file_name(const std::string& split, int64_t shard_index, int64_t num_shards);

}  // namespace tupe::data_pipeline
