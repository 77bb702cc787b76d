// The tokenizer of a checkpoint, as `tupe finetune` and `tupe evaluate` resolve it
// (docs/formats.md "Checkpoints", docs/config.md "[tokenizer]"):
//   - kind and lower-casing: what the checkpoint records (checkpoint::recorded_tokenizer).
//     A tokenizer.kind or tokenizer.lower_case typed on the command line that contradicts
//     the record is refused; one from a config file yields to the record, with a warning.
//     Without a record: the [tokenizer] values, as before.
//   - vocabulary: tokenizer.vocab when given, else the file the checkpoint carries, else
//     (older checkpoints) its saved tokenizer.vocab when readable. A tokenizer.vocab from a
//     config file whose SHA-256 is not the checkpoint's yields to the carried one (warning).
//     The caller checks the SHA-256 of the result (checkpoint::check_vocabulary).
#pragma once
#include <string>

#include "checkpoint/model_checkpoint.h"
#include "common/config_fields.h"
#include "common/config_given.h"
#include "data_pipeline/text/tokenizer_factory.h"

namespace tupe::finetune {

/// The [tokenizer] options to build `ckpt`'s tokenizer with: `options` as parsed, `given`
/// the keys the user set -> kGivenOnCommandLine or the config file (ConfigCli::given).
/// `warn`: log the warnings of config-file values that yield (every rank resolves the same
/// options; pass true on rank 0 alone, so a job warns once). Throws ONE-line tupe::Error
/// "tokenizer.<key>: X contradicts the checkpoint's Y (<where>)" or "tokenizer.vocab: ...
/// give --tokenizer.vocab" when no vocabulary is known.
data_pipeline::TokenizerOptions checkpoint_tokenizer_options(const data_pipeline::TokenizerOptions& options,
                                                             const KeyValues& given,
                                                             const checkpoint::ModelCheckpoint& ckpt, bool warn);

}  // namespace tupe::finetune
