#include "data_pipeline/preprocess_commit.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <set>
#include <sstream>

#include "common/error.h"
#include "common/folder_lock.h"
#include "common/log.h"

namespace tupe::data_pipeline {

namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;

/// Runs `f`: "" when it returns, else its error's one-line text.
std::string error_of(const std::function<void()>& f) {
  try {
    f();
    return "";
  } catch (const Error& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("internal error: ") + e.what();
  }
}

std::string human_bytes(int64_t b) {
  char buf[32];
  if (b >= (int64_t{1} << 20))
    std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(b) / (1 << 20));
  else
    std::snprintf(buf, sizeof buf, "%.1f KiB", static_cast<double>(b) / 1024);
  return buf;
}

/// Rank 0's progress line: streams, bytes, rate, ETA (from this rank's input bytes; every
/// rank has about the same share) and sequences.
std::string progress_line(const PreprocessProgress& p, double seconds, int world) {
  const double secs = std::max(1e-3, seconds);
  const double mb_per_s = static_cast<double>(p.bytes_done) / 1e6 / secs;
  const double eta = p.bytes_done > 0
                         ? secs * static_cast<double>(p.bytes_total - p.bytes_done) / static_cast<double>(p.bytes_done)
                         : 0.0;
  char line[256];
  std::snprintf(line, sizeof line,
                "preprocess: rank 0 of %d: %lld/%lld streams, %s of %s, %.1f MB/s, %.1f M tokens/s, ETA %.0f s, "
                "%lld sequences",
                world, static_cast<long long>(p.pieces_done), static_cast<long long>(p.pieces_total),
                human_bytes(p.bytes_done).c_str(), human_bytes(p.bytes_total).c_str(), mb_per_s,
                static_cast<double>(p.tokens) / 1e6 / secs, eta, static_cast<long long>(p.sequences));
  return line;
}

/// What phase 1 leaves for the others.
struct Plan {
  std::unique_ptr<Tokenizer> tokenizer;
  PreprocessPlan plan;
  std::vector<std::string> existing;  ///< shards already in the output folder
  std::string run_id;
  bool created_output = false;  ///< this run created the output folder (removed again if the run fails)
  std::unique_ptr<FolderLock> lock;  ///< the output folder's lock (rank 0), held until the run ends
};

/// Phase 1: inputs, tokenizer, the output folder and its lock (rank 0); the temporary files
/// of killed runs are removed; then the ranks agree on what the run is made of and share
/// rank 0's run id.
void plan_run(Plan& p, const PreprocessRequest& request, const PreprocessOptions& config,
              const TokenizerOptions& tokenizer, RankAgreement& ranks) {
  const std::string& output = request.output;
  run_agreed(ranks, [&] {
    TUPE_CHECK(!request.inputs.empty(), "preprocess: no input given (--input FILE_OR_FOLDER)");
    p.plan = plan_preprocess(request.inputs, output, config);
    p.tokenizer = make_tokenizer(tokenizer);
    std::error_code ec;
    p.created_output = !fs::exists(output, ec);
    if (ranks.rank() == 0) {  // one job per output folder; creates it
      FolderLockOptions lock_options;
      lock_options.key = "preprocess --output";
      lock_options.command = "tupe preprocess";
      lock_options.stale_after_s = lock_stale_after_s_from_env();
      p.lock = FolderLock::acquire(output, lock_options);
      if (!p.lock->notice().empty()) log::info(p.lock->notice());
    }
    p.existing = existing_shards(output);
    TUPE_CHECK(p.existing.empty() || request.overwrite, output << ": already holds shards (" << p.existing.front()
                                                               << ", ...); pass --overwrite to replace them");
    fs::create_directories(output, ec);
    TUPE_CHECK(fs::is_directory(output), output << ": cannot create the output folder (" << ec.message() << ")");
  });
  // Temporary files of killed runs, removed before any rank writes (the broadcast below holds
  // the others until rank 0 is done): each rank those of its host's dead writers; rank 0, which
  // holds the folder's lock, those of every host, so a healthy run has nothing to warn about.
  for (const auto& f : remove_stale_temp_shards(output, /*every_host=*/ranks.rank() == 0))
    log::warn("preprocess: removed " + f + ", left by a writer that no longer runs");
  // Every rank must see the same inputs and settings: a mixed set is never written. The
  // ranks compare the output folder as an absolute path (one relative path from ranks
  // started in different working folders would split one set over two folders); the run id
  // keeps it as given, so runs from different folders write identical shards.
  const auto description = describe_preprocess_run(p.plan, config, *p.tokenizer, output);
  auto compared = description;
  for (auto& [key, value] : compared)
    if (key == "output") value = fs::absolute(output).lexically_normal().string();
  const std::string differ = ranks.first_difference("preprocess input check", compared);
  if (!differ.empty()) throw AgreedError(differ);
  p.run_id = ranks.broadcast(ranks.rank() == 0 ? preprocess_run_id(description, p.plan) : std::string(), 0);
  log::info(
      "# " + std::to_string(p.plan.files.size()) + " input files, " + std::to_string(p.plan.pieces.size()) + " pieces" +
      (p.plan.streamed.empty()
           ? ""
           : " (+ those of " + std::to_string(p.plan.streamed.size()) + " compressed files, read whole by each rank)") +
      ", " + std::to_string(p.plan.jobs.size()) + " shards, " + std::to_string(ranks.world_size()) + " ranks");
}

/// Phase 3, after every rank wrote its shards: the wanted split is not empty, every rank
/// renames its shards into place; a failed rename takes back what the others renamed.
void commit_all(std::vector<std::unique_ptr<ShardWriter>>& writers, const Plan& p, const PreprocessRequest& request,
                const PreprocessOptions& config, RankAgreement& ranks) {
  const std::string wanted = config.writes_train() ? "train" : "validation";
  int64_t wanted_sequences = 0;
  for (const auto& w : writers)
    if (w->split() == wanted) wanted_sequences += w->num_sequences();
  if (ranks.sum({wanted_sequences})[0] == 0) {
    writers.clear();  // removes the temporary files
    throw AgreedError(p.plan.files.front().path + (p.plan.files.size() > 1 ? " (and the other inputs)" : "") + ": no " +
                      (config.writes_train() ? "training" : "validation") + " sequences (no tokenisable text)");
  }
  // A validation share that drew no document (a corpus of a few documents) would be an empty
  // validation split, which pre-training refuses: say so now, write nothing.
  if (config.writes_train() && config.writes_validation()) {
    int64_t validation_sequences = 0;
    for (const auto& w : writers)
      if (w->split() == "validation") validation_sequences += w->num_sequences();
    if (ranks.sum({validation_sequences})[0] == 0) {
      writers.clear();
      std::ostringstream msg;
      msg << p.plan.files.front().path << (p.plan.files.size() > 1 ? " (and the other inputs)" : "")
          << ": preprocess.validation_ratio = " << config.validation_ratio
          << " sent no document to validation (too few documents), and pre-training refuses an empty validation "
             "split; set validation_ratio = 0, raise it, or preprocess a validation file with --preprocess.split "
             "validation";
      if (config.documents == DocumentBoundary::kBlankLine)
        msg << " (with preprocess.documents = blank_line, text without blank lines is one document; "
               "--preprocess.documents line makes every line one)";
      throw AgreedError(msg.str());
    }
  }
  std::vector<std::string> committed;
  const std::string error = ranks.first_error(error_of([&] {
    for (auto& w : writers) {
      w->commit();
      committed.push_back(w->final_path());
    }
  }));
  if (error.empty()) return;
  std::error_code ec;
  for (const auto& f : committed) fs::remove(f, ec);
  if (ranks.rank() == 0 && request.overwrite)
    for (const auto& old : p.existing) fs::remove(old, ec);  // half replaced: no set at all, never a mixed one
  writers.clear();                                           // removes the temporary files not renamed
  throw AgreedError(error);
}

}  // namespace

void run_agreed(RankAgreement& ranks, const std::function<void()>& phase) {
  const std::string error = ranks.first_error(error_of(phase));
  if (!error.empty()) throw AgreedError(error);  // every rank holds the same message
}

namespace {

/// Phases 2 and 3 (write, commit) of a planned run.
PreprocessSummary write_and_commit(const Plan& p, const PreprocessRequest& request, const PreprocessOptions& config,
                                   RankAgreement& ranks) {
  const int rank = ranks.rank(), world = ranks.world_size();

  // Phase 2: every rank writes its shards under temporary names.
  ranks.begin_work();
  const auto t0 = Clock::now();
  auto last_print = t0;
  std::vector<std::unique_ptr<ShardWriter>> writers;
  int64_t null_values = 0;
  try {
    run_agreed(ranks, [&] {
      writers = run_preprocess_jobs(
          p.plan, config, *p.tokenizer, rank, world, request.command_line, p.run_id,
          [&](const PreprocessProgress& progress) {
            const auto now = Clock::now();
            const bool done = progress.pieces_done == progress.pieces_total;
            if (rank != 0 || request.quiet || (!done && now - last_print < std::chrono::seconds(1))) return;
            last_print = now;
            log::info(progress_line(progress, std::chrono::duration<double>(now - t0).count(), world));
          },
          &null_values);
    });
  } catch (const AgreedError&) {
    writers.clear();  // removes the temporary files
    throw;
  }

  // Phase 3: rename into place, then drop the shards of an earlier run this one did not rewrite.
  commit_all(writers, p, request, config, ranks);
  ranks.barrier();
  std::vector<int64_t> totals(5, 0);
  totals[4] = null_values;
  for (const auto& w : writers) {
    const size_t k = w->split() == "validation" ? 2 : 0;
    totals[k] += w->num_sequences();
    totals[k + 1] += w->num_tokens();
  }
  const std::vector<int64_t> sums = ranks.sum(totals);
  if (rank == 0) {
    std::set<std::string> planned;
    for (const auto& j : p.plan.jobs) planned.insert(fs::path(j.path).lexically_normal().string());
    for (const auto& old : p.existing)
      if (!planned.count(fs::path(old).lexically_normal().string())) fs::remove(old);
  }
  PreprocessSummary s;
  s.train_sequences = sums[0];
  s.train_tokens = sums[1];
  s.validation_sequences = sums[2];
  s.validation_tokens = sums[3];
  s.null_values = sums[4];
  s.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return s;
}

}  // namespace

PreprocessSummary run_preprocess(const PreprocessRequest& request, const PreprocessOptions& config,
                                 const TokenizerOptions& tokenizer, RankAgreement& ranks) {
  Plan p;
  try {
    plan_run(p, request, config, tokenizer, ranks);
    const PreprocessSummary summary = write_and_commit(p, request, config, ranks);
    if (ranks.rank() == 0 && request.on_success) request.on_success(summary);  // the lock still held
    return summary;
  } catch (const AgreedError&) {
    // Every rank has removed its temporary files (the writers' destructors); an output folder
    // this run created is removed again when it is empty, so a failed run leaves nothing.
    ranks.barrier();
    p.lock.reset();  // the lock file goes first: an output folder this run created is then empty
    std::error_code ec;
    if (ranks.rank() == 0 && p.created_output && fs::is_empty(request.output, ec)) fs::remove(request.output, ec);
    throw;
  }
}

std::string summary_line(const PreprocessSummary& s, const PreprocessOptions& config, const std::string& output) {
  std::ostringstream line;
  line << "wrote ";
  if (config.writes_train())
    line << s.train_sequences << " train sequences (" << s.train_tokens << " tokens) in " << config.num_shards
         << " shards";
  if (config.writes_train() && config.writes_validation()) line << ", ";
  if (config.writes_validation())
    line << s.validation_sequences << " validation sequences (" << s.validation_tokens << " tokens) in "
         << config.num_validation_shards << " shards";
  char secs[32];
  std::snprintf(secs, sizeof secs, "%.1f", s.seconds);
  line << " to " << output << " in " << secs << " s";
  if (s.null_values > 0)
    line << "; skipped " << s.null_values << " null value" << (s.null_values == 1 ? "" : "s") << " of column \""
         << config.text_field << "\"";
  return line.str();
}

}  // namespace tupe::data_pipeline
