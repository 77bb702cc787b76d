// Readers of single shard files into memory (used by open_pretrain_dataset, dataset.h).
// Each holds the HDF5 lock while it reads and checks everything it reads; errors are one
// line "<file>: <place>: <cause>".
#pragma once
#include <string>

#include "data_pipeline/dataset.h"
#include "data_pipeline/shard_format.h"
#include "data_pipeline/shard_set.h"

namespace tupe::data {

/// "tupe" when the file's root has attribute 'format', else "nvidia" (whose reader then
/// names any missing dataset). Throws when the file cannot be opened as HDF5.
std::string detect_shard_format(const std::string& path);

/// Reads one own shard (shard_format.h). Checks: format/version, expected vocabulary hash,
/// vocab size, dtypes, sum(sequence_lengths) == len(token_ids), counts == attributes,
/// 1 <= length <= max_seq_len, ids < vocab_size. `header` receives the shard's header.
ShardContents read_own_shard(const std::string& path, const DatasetOptions& options, ShardHeader& header);

/// Reads one NVIDIA BERT shard (FORMATS.md section 1; any integer dtypes). Checks: all six
/// datasets present with integer dtypes; [N, L] / [N, P] / [N] shapes agree; input_mask is
/// ones then zeros; masked positions ascending inside the real tokens (the first 0 ends the
/// list); ids < options.vocab_size. `max_seq_len` receives L.
ShardContents read_nvidia_shard(const std::string& path, const DatasetOptions& options, int64_t& max_seq_len);

}  // namespace tupe::data
