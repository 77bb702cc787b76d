// Masked-LM loss and accuracy by position in the sequence (`tupe analyze --validation-shards`):
// where in a sample a model predicts masked tokens well -- next to [CLS], in the middle, near
// the end -- which the one validation number hides and the positional term should change.
//
// Buckets of the sequence position t (0-based; t = 0 is [CLS], never masked):
//   0 | 1-7 | 8-31 | 32-63 | 64-127 | 128-255 | 256-511 | ...   (from 32 on, one per power of 2)
// Per bucket: the masked tokens, the sum of their cross-entropy (nats) and how many have the
// original id as the most likely one (ties: the lowest id, as at::argmax); written as
//   mlm_by_position.csv  bucket,first,last,masked,loss,accuracy   (a last row "all")
// where loss = CE sum / masked and accuracy = correct / masked (empty buckets left out).
// The validation batches are the run's own: its saved [data] settings (data.validation_seed,
// which keys the masks, the global batch, the masking), on one process (a sample's mask does
// not depend on the world size), so over the run's train.eval_batches (the default of
// `--eval-batches`) the masked tokens and their masks are those the run validated on.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "checkpoint/model_checkpoint.h"

namespace tupe::analyze {

/// The bucket of sequence position t >= 0 (the legend above).
int64_t position_bucket(int64_t t);
/// The first and last position of bucket k.
std::pair<int64_t, int64_t> bucket_range(int64_t k);

/// Sums of one bucket.
struct BucketSums {
  int64_t masked = 0;   ///< masked tokens
  double loss_sum = 0;  ///< sum of their cross-entropy (nats)
  int64_t correct = 0;  ///< those whose argmax is the original id
};

/// Adds M masked tokens to `sums` (grown as needed, indexed by bucket): `logits` (M, V) of
/// any floating dtype (widened to float64), `labels` (M) int64 original ids, `positions` (M)
/// int64 sequence positions. Throws tupe::Error when the shapes do not pair up.
void add_by_position(const at::Tensor& logits, const at::Tensor& labels, const at::Tensor& positions,
                     std::vector<BucketSums>& sums);

/// The buckets of `ckpt`'s model over the validation shards `shards` (a folder or files, comma
/// separated), the first `eval_batches` global batches (0 = all), in float32 on the CPU.
/// Throws tupe::Error naming the shards (another vocabulary, no validation split) or the
/// checkpoint (no saved [data] section).
std::vector<BucketSums> mlm_by_position(const checkpoint::ModelCheckpoint& ckpt, const std::string& shards,
                                        int64_t eval_batches);

/// The run's train.eval_batches from `ckpt`'s saved config (0 = all; 0 when not recorded).
/// Throws tupe::Error naming the checkpoint when the value is not a count.
int64_t run_eval_batches(const checkpoint::ModelCheckpoint& ckpt);

/// mlm_by_position.csv's text (the legend above).
std::string by_position_csv(const std::vector<BucketSums>& sums);

/// One set of validation shards scored whole (`tupe analyze --length-shards`): the same text
/// cut at another sequence length tells how the model does beyond (or below) its training
/// length. A set whose longest sequence needs more positions than the model has (a learned
/// table cannot extrapolate) is not scored, and `note` says so.
struct LengthRow {
  std::string shards;
  int64_t max_seq_len = 0;  ///< the set's longest sequence (tokens)
  BucketSums total;         ///< all its masked tokens (none when not scored)
  std::string note;         ///< "" when scored
};

/// The row of `shards` for `ckpt` (first `eval_batches` global batches; 0 = all). Throws as
/// mlm_by_position.
LengthRow mlm_at_length(const checkpoint::ModelCheckpoint& ckpt, const std::string& shards, int64_t eval_batches);

/// mlm_by_length.csv's text: shards,max_seq_len,masked,loss,accuracy,note.
std::string by_length_csv(const std::vector<LengthRow>& rows);

}  // namespace tupe::analyze
