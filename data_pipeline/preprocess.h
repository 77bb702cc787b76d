// Preprocessing: raw text files -> tokenised, packed sequences in the project's shards
// (shard_format.h). No MPI here: the caller (cli/cmd_preprocess.cpp) passes rank and world
// size as plain ints and does the commit handshake.
//
// Inputs (corpus.h, corpus_stream.h): plain text or JSON lines, each uncompressed, gzip or
// zstd (by magic bytes); Parquet and Arrow IPC files (columnar_source.h, by magic bytes).
//
// Determinism, and why the rank count does not matter: the input is cut into pieces, piece
// k of a file being the documents that start in bytes [k*P, (k+1)*P) (P = piece_bytes as
// resolved by resolve_piece_bytes) of its text (decompressed text for a compressed file);
// piece k of a Parquet or Arrow file is its row group or record batch k, whatever its size.
// Pieces are numbered over all uncompressed files in order, then over the compressed files in order (those cannot be read
// at an offset: each rank reads them whole from the start and keeps the documents of its
// pieces, so their piece counts are learnt while reading); piece p goes to train shard
// p mod N and to validation shard p mod Nv. Whether a document goes to validation is drawn
// from its text and the seed alone (document_split.h). Each (split, piece)
// is packed as one stream (packing.h), so the sequences of shard s are a pure function of the
// input bytes, the config and the seed. Shards (train 0..N-1, then validation 0..Nv-1) are
// dealt to ranks round-robin (job j to rank j mod W): every rank count writes byte-identical
// shards (the command line is recorded, the rank count is not).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/config_fields.h"
#include "data_pipeline/corpus.h"
#include "data_pipeline/corpus_stream.h"
#include "data_pipeline/packing.h"
#include "data_pipeline/shard_writer.h"
#include "data_pipeline/tokenizer.h"

namespace tupe::data_pipeline {

/// Where a run's documents go: `ratio` splits them by validation_ratio (train shards always
/// written), `validation` sends every document to validation shards (a separate validation
/// file, e.g. WikiText's wiki.valid.raw; no train shard is written).
enum class SplitMode { kRatio, kValidation };
inline constexpr Choice<SplitMode> kSplitModeWords[] = {{"ratio", SplitMode::kRatio},
                                                        {"validation", SplitMode::kValidation}};

/// [preprocess] section. Every field -- its meaning, unit, default and range -- is described
/// once, in the field table in preprocess.cpp (common/config_fields.h; docs/config.md).
struct PreprocessOptions {
  PreprocessOptions() { fields().reset(*this); }
  int64_t max_seq_len;
  Packing packing;
  DocumentBoundary documents;
  double validation_ratio;
  SplitMode split;
  int64_t num_shards;
  int64_t num_validation_shards;
  int64_t seed;
  int64_t piece_bytes;
  int64_t compression_level;
  InputFormat input_format;
  std::string text_field;

  /// Throws tupe::Error "preprocess.<key>: <cause>".
  void validate() const;
  /// Whether the run writes train shards / validation shards.
  bool writes_train() const { return split == SplitMode::kRatio; }
  bool writes_validation() const { return split == SplitMode::kValidation || validation_ratio > 0; }
  static const FieldTable<PreprocessOptions>& fields();
};

/// A unit of input: the documents starting in bytes [begin, end) of one file, or one row
/// group / record batch of a columnar file.
struct Piece {
  int64_t file;        ///< index into PreprocessPlan::files
  int64_t begin;       ///< first byte (nominal)
  int64_t end;         ///< one past the last byte (nominal)
  int64_t group = -1;  ///< columnar file: index into PreprocessPlan::groups
};

/// One output shard.
struct ShardJob {
  std::string split;    ///< "train" | "validation"
  int64_t shard_index;  ///< S
  int64_t num_shards;   ///< N or Nv
  std::string path;     ///< <output>/<split>-S-of-N.h5
};

struct PreprocessPlan {
  int64_t piece_bytes = 0;       ///< resolved (resolve_piece_bytes); recorded in every shard's header
  std::vector<InputFile> files;  ///< sorted inputs (json_lines set from preprocess.input_format)
  std::vector<Piece> pieces;     ///< the pieces of the uncompressed files, in file then byte (or group) order
  std::vector<ColumnarGroup> groups;  ///< the row groups / record batches of the columnar files, in piece order
  std::vector<int64_t> streamed;  ///< compressed files (indexes into files), in order: their
                                  ///< pieces are numbered from pieces.size() on, as they are read
  std::vector<ShardJob> jobs;    ///< train shards, then validation shards; job j belongs to rank j mod W
  /// Whether piece p feeds job j.
  bool feeds(int64_t piece, const ShardJob& job) const {
    return piece % job.num_shards == job.shard_index;
  }
  /// The first job (in `jobs` order) that piece p feeds: the one whose rank counts what the
  /// piece holds once (its null values), however many jobs read it.
  int64_t first_job(int64_t piece) const { return piece % jobs.front().num_shards; }
};

/// preprocess.piece_bytes, or for 0 (auto) the input's bytes on disk / (16 x the most shards
/// of a split written), clamped to [64 KiB, 1 MiB]: a small corpus is still dealt evenly over
/// its shards (a 1.06 MiB file in 1 MiB pieces gave shards of 4,651 and 309 sequences). Auto
/// depends on the bytes on disk, so a plain and a compressed copy of a corpus give identical
/// shards only with the same explicit piece_bytes.
int64_t resolve_piece_bytes(const PreprocessOptions& config, int64_t input_bytes);

/// Lists the inputs (list_input_files) and lays out pieces and shards; a columnar file's
/// schema is checked and its groups listed (columnar_groups). Throws tupe::Error for bad
/// inputs (missing, empty, a columnar file without its text column) or config.
PreprocessPlan plan_preprocess(const std::vector<std::string>& inputs, const std::string& output_dir,
                               const PreprocessOptions& config);

/// Shard files (train-*-of-*.h5, validation-*-of-*.h5) already in `output_dir`.
std::vector<std::string> existing_shards(const std::string& output_dir);

/// Progress of one rank.
struct PreprocessProgress {
  int64_t pieces_done = 0, pieces_total = 0;  ///< (split, piece) streams of this rank, + 1 per compressed file
  int64_t bytes_done = 0, bytes_total = 0;    ///< input bytes of those pieces (nominal) and compressed files
  int64_t sequences = 0, tokens = 0;          ///< written so far
};
using ProgressFn = std::function<void(const PreprocessProgress&)>;

/// What a preprocess run is made of, as ordered (key, value) entries: every preprocess
/// setting, the tokenizer (kind, vocabulary SHA-256, case), the output folder, and each input
/// file (path as given or found, size in bytes). All ranks of one run must agree on it
/// (dist/small_collectives.h); a mixed set of shards is never written.
std::vector<std::pair<std::string, std::string>> describe_preprocess_run(const PreprocessPlan& plan,
                                                                         const PreprocessOptions& config,
                                                                         const Tokenizer& tokenizer,
                                                                         const std::string& output_dir);

/// The run_id recorded in every shard of a run (shard_format.h): the first 16 hex digits of
/// the SHA-256 of the run's description plus the inputs' modification times (so a rerun on
/// edited inputs of the same size is another run). Computed on one rank and broadcast.
std::string preprocess_run_id(const std::vector<std::pair<std::string, std::string>>& description,
                              const PreprocessPlan& plan);

/// Tokenises and packs the jobs of `rank` (of `world_size`) and writes their shards under
/// temporary names (each header records `command_line` and `run_id`); returns the closed, uncommitted writers (commit() renames; destroying
/// one removes its file). `null_values`, when given, receives the null values of the text
/// column that this rank counted (each columnar piece's counted by one rank only:
/// PreprocessPlan::first_job), skipped; the first ones are logged as warnings with their row.
/// Throws tupe::Error "<file>: invalid UTF-8 at byte N", "<file>: no text (only blank lines)",
/// ColumnarReader's errors, tokenizer or HDF5 errors.
std::vector<std::unique_ptr<ShardWriter>> run_preprocess_jobs(const PreprocessPlan& plan,
                                                              const PreprocessOptions& config,
                                                              const Tokenizer& tokenizer, int64_t rank,
                                                              int64_t world_size, const std::string& command_line,
                                                              const std::string& run_id, const ProgressFn& progress,
                                                              int64_t* null_values = nullptr);

}  // namespace tupe::data_pipeline
