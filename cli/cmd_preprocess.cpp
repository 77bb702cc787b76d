// tupe preprocess: raw text -> tokenised, packed HDF5 shards (data_pipeline/preprocess.h).
// Runs alone or under mpirun: shard files are dealt to ranks round-robin, and the output is
// byte-identical for any rank count. The ranks use the project's MPI environment
// (dist/agreement.h, no MPI call here) to agree on success before any shard is renamed into
// place, to pass the first error to every rank, to check that every rank sees the same inputs
// and settings, to share the run id and to sum the totals. Usage:
//   [mpirun -np W] tupe preprocess --input FILE_OR_FOLDER [...] --output DIR
//       --tokenizer.vocab vocab.txt [--preprocess.max_seq_len 128 ...]
#include <boost/program_options/options_description.hpp>
#include <boost/program_options/value_semantic.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <set>
#include <sstream>

#include "cli/commands.h"
#include "cli/config_cli.h"
#include "cli/rank_guard.h"
#include "common/error.h"
#include "common/log.h"
#include "data_pipeline/preprocess.h"
#include "data_pipeline/text/tokenizer_factory.h"
#include "dist/agreement.h"
#include "dist/mpi_env.h"

namespace po = boost::program_options;

namespace tupe::cli {

namespace {

/// Runs `f`, turning a tupe::Error into its message.
template <class F>
std::string attempt(F&& f) {
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

int preprocess_job(const dist::MpiEnv& env, int argc, char** argv) {
  const int rank = env.rank(), world = env.world_size();
  data_pipeline::PreprocessOptions config;
  data_pipeline::TokenizerOptions tok_options;
  std::vector<std::string> inputs;
  std::string output;
  ConfigCli cli("preprocess",
                "Tokenises text or JSON-lines files (plain, gzip or zstd; or folders of them) and packs them into HDF5 shards.\n"
                "Under mpirun the shard files are dealt to ranks; the result does not depend on the rank count.");
  cli.section("preprocess", data_pipeline::PreprocessOptions::fields(), config);
  cli.section("tokenizer", data_pipeline::TokenizerOptions::fields(), tok_options);
  cli.options().add_options()("input", po::value<std::vector<std::string>>(&inputs)->multitoken()->composing(),
                              "text or JSON-lines files, plain, gzip or zstd, or folders of them (searched recursively), one or more")(
      "output", po::value<std::string>(&output), "folder for the shards (created if missing)")(
      "overwrite", "replace shards already in the output folder (stale ones are removed after success)")(
      "quiet", "no progress lines");

  std::unique_ptr<data_pipeline::Tokenizer> tokenizer;
  data_pipeline::PreprocessPlan plan;
  std::vector<std::string> existing;
  bool help = false, overwrite = false, quiet = false;
  std::string command_line = "tupe";
  for (int i = 0; i < argc; ++i) command_line += std::string(" ") + argv[i];

  // Phase 1: options, inputs, tokenizer, output folder.
  std::string err = dist::first_error(env, attempt([&] {
    help = !cli.parse(argc, argv);
    if (help) return;
    overwrite = cli.vm().count("overwrite") > 0;
    quiet = cli.vm().count("quiet") > 0;
    TUPE_CHECK(!inputs.empty(), "preprocess: no input given (--input FILE_OR_FOLDER)");
    plan = data_pipeline::plan_preprocess(inputs, output, config);
    tokenizer = data_pipeline::make_tokenizer(tok_options);
    existing = data_pipeline::existing_shards(output);
    TUPE_CHECK(existing.empty() || overwrite, output << ": already holds shards (" << existing.front()
                                                     << ", ...); pass --overwrite to replace them");
    std::error_code ec;
    std::filesystem::create_directories(output, ec);
    TUPE_CHECK(std::filesystem::is_directory(output), output << ": cannot create the output folder ("
                                                             << ec.message() << ")");
  }));
  if (help) return 0;
  if (!err.empty()) throw AgreedError(err);  // every rank holds the same message
  // Every rank must see the same inputs and settings: a mixed set is never written.
  const auto description = data_pipeline::describe_preprocess_run(plan, config, *tokenizer, output);
  // The ranks compare the output folder as an absolute path (the same relative path from
  // ranks started in different working folders would split one set over two folders); the
  // run id keeps it as given, so runs from different folders write identical shards.
  auto compared = description;
  for (auto& [key, value] : compared)
    if (key == "output") value = std::filesystem::absolute(output).lexically_normal().string();
  err = dist::first_difference(env, "preprocess input check", compared);
  if (!err.empty()) throw AgreedError(err);  // every rank holds the same message
  const std::string run_id =
      dist::broadcast_string(env, rank == 0 ? data_pipeline::preprocess_run_id(description, plan) : std::string(), 0);
  // Temporary files of killed runs into this folder (each rank clears its own host's).
  std::vector<std::string> other_hosts;
  for (const auto& f : data_pipeline::remove_stale_temp_shards(output, &other_hosts))
    log::warn("preprocess: removed " + f + ", left by a writer that no longer runs");
  if (rank == 0)
    for (const auto& f : other_hosts)
      log::warn("preprocess: kept " + f + " (written on another host; remove it if no run writes there)");
  log::info("# " + std::to_string(plan.files.size()) + " input files, " + std::to_string(plan.pieces.size()) +
            " pieces" + (plan.streamed.empty() ? "" : " (+ those of " + std::to_string(plan.streamed.size()) +
                                                           " compressed files, read whole by each rank)") +
            ", " + std::to_string(plan.jobs.size()) + " shards, " + std::to_string(world) + " ranks");

  // Phase 2: every rank writes its shards under temporary names.
  const auto t0 = std::chrono::steady_clock::now();
  auto last_print = t0;
  std::vector<std::unique_ptr<data_pipeline::ShardWriter>> writers;
  err = dist::first_error(
      env, attempt([&] {
        writers = data_pipeline::run_preprocess_jobs(
            plan, config, *tokenizer, rank, world, command_line, run_id,
            [&](const data_pipeline::PreprocessProgress& p) {
              const auto now = std::chrono::steady_clock::now();
              const bool done = p.pieces_done == p.pieces_total;
              if (rank != 0 || quiet || (!done && now - last_print < std::chrono::seconds(1))) return;
              last_print = now;
              // Rate and ETA from this rank's input bytes (every rank has about the same share).
              const double secs = std::max(1e-3, std::chrono::duration<double>(now - t0).count());
              const double mb_per_s = static_cast<double>(p.bytes_done) / 1e6 / secs;
              const double eta = p.bytes_done > 0 ? secs * static_cast<double>(p.bytes_total - p.bytes_done) /
                                                        static_cast<double>(p.bytes_done)
                                                  : 0.0;
              char line[256];
              std::snprintf(
                  line, sizeof line,
                  "preprocess: rank 0 of %d: %lld/%lld streams, %s of %s, %.1f MB/s, %.1f M tokens/s, ETA %.0f s, "
                  "%lld sequences",
                  world, static_cast<long long>(p.pieces_done), static_cast<long long>(p.pieces_total),
                  human_bytes(p.bytes_done).c_str(), human_bytes(p.bytes_total).c_str(), mb_per_s,
                  static_cast<double>(p.tokens) / 1e6 / secs, eta, static_cast<long long>(p.sequences));
              log::info(line);
            });
      }));
  if (!err.empty()) {
    writers.clear();  // removes the temporary files
    throw AgreedError(err);  // every rank holds the same message
  }

  // Phase 3: all ranks succeeded and wrote something: rename into place, then drop stale shards.
  // The split the run exists for must not come out empty (train, or validation with split = validation).
  int64_t wanted_sequences = 0;
  for (const auto& w : writers)
    if ((w->final_path().find("validation-") == std::string::npos) == config.writes_train())
      wanted_sequences += w->num_sequences();
  if (dist::sum_over_ranks(env, {wanted_sequences})[0] == 0) {
    writers.clear();
    throw AgreedError(plan.files.front().path + (plan.files.size() > 1 ? " (and the other inputs)" : "") +
                      (config.writes_train() ? ": no training sequences" : ": no validation sequences") +
                      " (no tokenisable text)");
  }
  err = dist::first_error(env, attempt([&] {
    for (auto& w : writers) w->commit();
  }));
  if (!err.empty()) throw AgreedError(err);  // every rank holds the same message
  dist::barrier(env);
  std::vector<int64_t> totals(4, 0);
  for (const auto& w : writers) {
    const int k = w->final_path().find("validation-") != std::string::npos ? 2 : 0;
    totals[k] += w->num_sequences();
    totals[k + 1] += w->num_tokens();
  }
  const std::vector<int64_t> sums = dist::sum_over_ranks(env, totals);
  if (rank == 0) {
    std::set<std::string> planned;
    for (const auto& j : plan.jobs) planned.insert(std::filesystem::path(j.path).lexically_normal().string());
    for (const auto& old : existing)
      if (!planned.count(std::filesystem::path(old).lexically_normal().string())) std::filesystem::remove(old);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::ostringstream line;
    line << "wrote ";
    if (config.writes_train())
      line << sums[0] << " train sequences (" << sums[1] << " tokens) in " << config.num_shards << " shards";
    if (config.writes_train() && config.writes_validation()) line << ", ";
    if (config.writes_validation())
      line << sums[2] << " validation sequences (" << sums[3] << " tokens) in " << config.num_validation_shards
           << " shards";
    char secs_text[32];
    std::snprintf(secs_text, sizeof secs_text, "%.1f", secs);
    line << " to " << output << " in " << secs_text << " s";
    log::info(line.str());
    // The whole effective config next to the shards (written after success only: a failed
    // run leaves nothing); the console gets one line.
    log::info(cli.write_effective((std::filesystem::path(output) / "effective_config.ini").string()));
  }
  return 0;
}

}  // namespace

int run_preprocess(int argc, char** argv) {
  dist::MpiEnv env(&argc, &argv);
  return run_job_on_ranks(env, "preprocess", [&] { return preprocess_job(env, argc, argv); });
}

}  // namespace tupe::cli
