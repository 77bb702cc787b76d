// The commit protocol of `tupe preprocess` over the ranks of one run: every rank writes its
// shards (preprocess.h deals them round-robin) under temporary names, and the set appears
// in the output folder only when every rank succeeded -- or not at all.
//
// Phases (each ends in an agreement: every rank learns whether all succeeded, and the
// lowest failing rank's one-line message, thrown on every rank as tupe::AgreedError):
//   1. plan: inputs, tokenizer, the output folder (refused when it holds shards and
//      overwrite is off); the ranks compare what the run is made of (settings, tokenizer,
//      inputs and their sizes, the output folder as an absolute path) and rank 0's run id is
//      shared; temporary files of killed writers on this host are removed;
//   2. write: each rank writes its shards under temporary names
//      (shard_writer.h: "<final>.tmp-<host>-<pid>");
//   3. commit: the split the run exists for must hold a sequence (train, or validation with
//      preprocess.split = validation; counted by each shard's `split` attribute); every rank
//      renames its shards into place; then rank 0 removes shards of an earlier run that this
//      run did not rewrite (with overwrite).
// A failure in any phase leaves no shard of this run and no temporary file: a failing
// write or commit removes the temporary files (each writer's destructor), and a failed
// commit removes the shards the other ranks had already renamed, together with the shards of
// the earlier run that overwrite was replacing (the folder then holds no shard set at all,
// never a mixed one).
// No MPI here: the ranks talk through RankAgreement (cli/cmd_preprocess.cpp implements it
// with dist/small_collectives.h; the tests with threads of one process).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "data_pipeline/preprocess.h"
#include "data_pipeline/text/tokenizer_factory.h"

namespace tupe::data_pipeline {

/// The collectives the protocol needs. Every rank calls the same ones in the same order.
class RankAgreement {
 public:
  virtual ~RankAgreement() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  /// "" when `my_error` is "" on every rank, else the error of the lowest rank with one.
  virtual std::string first_error(const std::string& my_error) = 0;
  /// "" when every rank passed the same entries, else one line naming `what`, the first
  /// differing rank and entry.
  virtual std::string first_difference(const std::string& what,
                                       const std::vector<std::pair<std::string, std::string>>& entries) = 0;
  /// The element-wise sums over ranks (the same length on every rank).
  virtual std::vector<int64_t> sum(const std::vector<int64_t>& values) = 0;
  /// `text` of rank `root` on every rank.
  virtual std::string broadcast(const std::string& text, int root) = 0;
  /// Returns when every rank has entered it.
  virtual void barrier() = 0;
  /// The start-up is over (the first piece is next): from now on the ranks may wait for
  /// the slowest one without a start-up bound (dist/startup.h).
  virtual void begin_work() = 0;
};

/// Runs `phase` on this rank and agrees on the outcome: returns when it succeeded on every
/// rank; otherwise throws tupe::AgreedError with the lowest failing rank's message on every
/// rank (a tupe::Error's text; "internal error: ..." for another std::exception). Collective.
void run_agreed(RankAgreement& ranks, const std::function<void()>& phase);

struct PreprocessSummary;

/// One run as the command line gives it.
struct PreprocessRequest {
  std::vector<std::string> inputs;  ///< text / JSON-lines files or folders (preprocess.h)
  std::string output;               ///< the shard folder (created when missing)
  bool overwrite = false;           ///< replace shards already in `output`
  bool quiet = false;               ///< no progress lines (rank 0 prints them, about one a second)
  std::string command_line;         ///< recorded in every shard's header
  /// Rank 0, after a successful commit, while the output folder's lock is still held (the
  /// effective config written beside the shards); may be empty.
  std::function<void(const PreprocessSummary&)> on_success;
};

/// What a successful run wrote, summed over ranks.
struct PreprocessSummary {
  int64_t train_sequences = 0, train_tokens = 0;
  int64_t validation_sequences = 0, validation_tokens = 0;
  int64_t null_values = 0;  ///< null values of a Parquet/Arrow text column, skipped
  double seconds = 0;  ///< wall time of the write and commit phases
};

/// The whole run, collective over `ranks` (every rank passes the same request and options).
/// Logs the plan, progress (rank 0) and what it removed. Throws tupe::AgreedError (the same
/// one-line message on every rank) when any rank fails in any phase -- bad or differing
/// inputs, a tokenizer or vocabulary error, a shard folder already in use, invalid text,
/// an empty split, a failed rename -- leaving no shard of the run and no temporary file.
PreprocessSummary run_preprocess(const PreprocessRequest& request, const PreprocessOptions& config,
                                 const TokenizerOptions& tokenizer, RankAgreement& ranks);

/// "wrote N train sequences (T tokens) in S shards, ... to <output> in X s[; skipped K null
/// values of column "text"]": the run's line.
std::string summary_line(const PreprocessSummary& summary, const PreprocessOptions& config, const std::string& output);

}  // namespace tupe::data_pipeline
