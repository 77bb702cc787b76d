#include "data_pipeline/shard_format.h"

#include <algorithm>
#include <cstdio>

#include "common/error.h"
#include "common/crc32c.h"
#include "data_pipeline/hdf5_util.h"

namespace tupe::data_pipeline {

TokenDtype token_dtype_for_vocab(int64_t vocab_size) {
  if (vocab_size <= 256) return TokenDtype::kUint8;
  if (vocab_size <= 65536) return TokenDtype::kUint16;
  return TokenDtype::kInt32;
}

hid_t token_file_type(TokenDtype dtype) {
  switch (dtype) {
    case TokenDtype::kUint8: return H5T_STD_U8LE;
    case TokenDtype::kUint16: return H5T_STD_U16LE;
    case TokenDtype::kInt32: return H5T_STD_I32LE;
  }
  return H5T_STD_I32LE;
}

void write_shard_header(const std::string& path, hid_t file, const ShardHeader& h) {
  using namespace h5;
  write_string_attribute(path, file, "format", kShardFormatName);
  write_int_attribute(path, file, "format_version", kShardFormatVersion);
  write_string_attribute(path, file, "split", h.split);
  write_int_attribute(path, file, "shard_index", h.shard_index);
  write_int_attribute(path, file, "num_shards", h.num_shards);
  write_string_attribute(path, file, "tokenizer_kind", h.tokenizer_kind);
  write_int_attribute(path, file, "vocab_size", h.vocab_size);
  write_string_attribute(path, file, "vocab_sha256", h.vocab_sha256);
  write_int_attribute(path, file, "lower_case", h.lower_case ? 1 : 0);
  write_int_attribute(path, file, "pad_id", h.special.pad);
  write_int_attribute(path, file, "unk_id", h.special.unk);
  write_int_attribute(path, file, "cls_id", h.special.cls);
  write_int_attribute(path, file, "sep_id", h.special.sep);
  write_int_attribute(path, file, "mask_id", h.special.mask);
  write_int_attribute(path, file, "max_seq_len", h.max_seq_len);
  write_string_attribute(path, file, "packing", h.packing);
  write_string_attribute(path, file, "documents", h.documents);
  write_int_attribute(path, file, "num_sequences", h.num_sequences);
  write_int_attribute(path, file, "num_tokens", h.num_tokens);
  write_string_attribute(path, file, "command_line", h.command_line);
  write_int_attribute(path, file, "seed", h.seed);
  write_double_attribute(path, file, "validation_ratio", h.validation_ratio);
  write_int_attribute(path, file, "piece_bytes", h.piece_bytes);
  write_string_attribute(path, file, "split_rule", h.split_rule);
  if (!h.run_id.empty()) write_string_attribute(path, file, "run_id", h.run_id);
}

namespace {

int32_t read_id(const std::string& path, hid_t file, const char* name, int64_t vocab_size) {
  const int64_t v = h5::read_int_attribute(path, file, name);
  TUPE_CHECK(v >= 0 && v < vocab_size,
             path << ": attribute '" << name << "' = " << v << " is outside the vocabulary of size " << vocab_size);
  return static_cast<int32_t>(v);
}

}  // namespace

ShardHeader read_shard_header(const std::string& path, hid_t file) {
  using namespace h5;
  TUPE_CHECK(has_attribute(file, "format"),
             path << ": not a tupe shard (no attribute 'format'; NVIDIA shards hold dataset 'masked_lm_positions')");
  const std::string format = read_string_attribute(path, file, "format");
  TUPE_CHECK(format == kShardFormatName,
             path << ": not a tupe shard (attribute 'format' is '" << format << "', expected '" << kShardFormatName << "')");
  const int64_t version = read_int_attribute(path, file, "format_version");
  TUPE_CHECK(version >= 1 && version <= kShardFormatVersion,
             path << ": shard format version " << version << " is not one this build reads (1.." << kShardFormatVersion
                  << ")");
  ShardHeader h;
  h.format_version = version;
  h.split = read_string_attribute(path, file, "split");
  h.shard_index = read_int_attribute(path, file, "shard_index");
  h.num_shards = read_int_attribute(path, file, "num_shards");
  h.tokenizer_kind = read_string_attribute(path, file, "tokenizer_kind");
  h.vocab_size = read_int_attribute(path, file, "vocab_size");
  TUPE_CHECK(h.vocab_size > 0 && h.vocab_size <= (int64_t{1} << 31),
             path << ": attribute 'vocab_size' = " << h.vocab_size << " is out of range");
  h.vocab_sha256 = read_string_attribute(path, file, "vocab_sha256");
  h.lower_case = read_int_attribute(path, file, "lower_case") != 0;
  h.special.pad = read_id(path, file, "pad_id", h.vocab_size);
  h.special.unk = read_id(path, file, "unk_id", h.vocab_size);
  h.special.cls = read_id(path, file, "cls_id", h.vocab_size);
  h.special.sep = read_id(path, file, "sep_id", h.vocab_size);
  h.special.mask = read_id(path, file, "mask_id", h.vocab_size);
  h.max_seq_len = read_int_attribute(path, file, "max_seq_len");
  TUPE_CHECK(h.max_seq_len >= 3, path << ": attribute 'max_seq_len' = " << h.max_seq_len << " is below 3");
  h.packing = read_string_attribute(path, file, "packing");
  h.documents = read_string_attribute(path, file, "documents");
  h.num_sequences = read_int_attribute(path, file, "num_sequences");
  h.num_tokens = read_int_attribute(path, file, "num_tokens");
  h.command_line = read_string_attribute(path, file, "command_line");
  h.seed = read_int_attribute(path, file, "seed");
  h.validation_ratio = read_double_attribute(path, file, "validation_ratio");
  h.piece_bytes = read_int_attribute(path, file, "piece_bytes");
  if (has_attribute(file, "split_rule")) h.split_rule = read_string_attribute(path, file, "split_rule");
  if (has_attribute(file, "run_id")) h.run_id = read_string_attribute(path, file, "run_id");
  return h;
}

uint32_t sample_checksum(int64_t length, int64_t ordinary, const void* token_bytes, size_t bytes) {
  const auto len = static_cast<uint32_t>(length);
  const auto ord = static_cast<uint16_t>(ordinary);
  const unsigned char head[6] = {static_cast<unsigned char>(len),       static_cast<unsigned char>(len >> 8),
                                 static_cast<unsigned char>(len >> 16), static_cast<unsigned char>(len >> 24),
                                 static_cast<unsigned char>(ord),       static_cast<unsigned char>(ord >> 8)};
  return crc32c(crc32c(0, head, sizeof head), token_bytes, bytes);
}

namespace {

/// Little-endian bytes of ids[0..n) at width W (1, 2 or 4) into `out` (n * W bytes).
template <size_t W>
void encode_ids(const int32_t* ids, int64_t n, unsigned char* out) {
  for (int64_t k = 0; k < n; ++k) {
    const auto v = static_cast<uint32_t>(ids[k]);
    if constexpr (W == 1) {
      out[k] = static_cast<unsigned char>(v);
    } else if constexpr (W == 2) {
      out[2 * k] = static_cast<unsigned char>(v);
      out[2 * k + 1] = static_cast<unsigned char>(v >> 8);
    } else {
      out[4 * k] = static_cast<unsigned char>(v);
      out[4 * k + 1] = static_cast<unsigned char>(v >> 8);
      out[4 * k + 2] = static_cast<unsigned char>(v >> 16);
      out[4 * k + 3] = static_cast<unsigned char>(v >> 24);
    }
  }
}

}  // namespace

uint32_t sample_checksum_of_ids(int64_t ordinary, const int32_t* ids, int64_t n, size_t element_bytes) {
  TUPE_CHECK(element_bytes == 1 || element_bytes == 2 || element_bytes == 4,
             "sample checksum: token width " << element_bytes << " bytes (internal)");
  const auto len = static_cast<uint32_t>(n);
  const auto ord = static_cast<uint16_t>(ordinary);
  const unsigned char head[6] = {static_cast<unsigned char>(len),       static_cast<unsigned char>(len >> 8),
                                 static_cast<unsigned char>(len >> 16), static_cast<unsigned char>(len >> 24),
                                 static_cast<unsigned char>(ord),       static_cast<unsigned char>(ord >> 8)};
  uint32_t crc = crc32c(0, head, sizeof head);
  // Encoded in pieces on the stack: no allocation per sample.
  constexpr int64_t kPiece = 256;
  unsigned char buf[kPiece * 4];
  for (int64_t at = 0; at < n; at += kPiece) {
    const int64_t m = std::min(kPiece, n - at);
    if (element_bytes == 1)
      encode_ids<1>(ids + at, m, buf);
    else if (element_bytes == 2)
      encode_ids<2>(ids + at, m, buf);
    else
      encode_ids<4>(ids + at, m, buf);
    crc = crc32c(crc, buf, static_cast<size_t>(m) * element_bytes);
  }
  return crc;
}

void fail_checksum_mismatch(const std::string& path, int64_t sample, int64_t token_begin, int64_t length) {
  TUPE_FAIL(path << ": sample " << sample << " (tokens " << token_begin << ".." << token_begin + length - 1 << " of '"
                 << kTokenIdsDataset
                 << "'): checksum mismatch: the shard is damaged or was changed after preprocessing; restore it from a "
                    "good copy or run tupe preprocess again, then resume from the last checkpoint");
}

std::string shard_file_name(const std::string& split, int64_t shard_index, int64_t num_shards) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "-%05lld-of-%05lld.h5", static_cast<long long>(shard_index),
                static_cast<long long>(num_shards));
  return split + buf;
}

}  // namespace tupe::data_pipeline
