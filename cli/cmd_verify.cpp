// tupe verify: checks shards or checkpoints before the GPUs start (data_pipeline/shard_verify.h,
// checkpoint/checkpoint_store.h). Usage:
//   [mpirun -np W] tupe verify --shards DIR_OR_FILE [...]   the files dealt to ranks (i mod W)
//   tupe verify --checkpoint DIR                            a step_N folder, or every one in a checkpoint.dir
// Prints one line per damaged file and a summary line; exit status 0 when whole, 1 when
// anything is damaged or the options are bad (one error line).
#include <boost/program_options/value_semantic.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>

#include "checkpoint/checkpoint_store.h"
#include "cli/commands.h"
#include "cli/config_cli.h"
#include "cli/rank_guard.h"
#include "common/error.h"
#include "common/log.h"
#include "data_pipeline/shard_readers.h"
#include "data_pipeline/shard_verify.h"
#include "dist/small_collectives.h"
#include "dist/heartbeat.h"
#include "dist/mpi_env.h"

namespace po = boost::program_options;
namespace fs = std::filesystem;

namespace tupe::cli {

namespace {

/// "12.3 MB in 0.45 s (27.3 MB/s)".
std::string rate_text(int64_t bytes, double seconds) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "%.1f MB in %.2f s (%.0f MB/s)", static_cast<double>(bytes) / 1e6, seconds,
                seconds > 0 ? static_cast<double>(bytes) / 1e6 / seconds : 0.0);
  return buf;
}

int verify_checkpoints(const std::string& path) {
  std::error_code ec;
  TUPE_CHECK(fs::is_directory(path, ec), path << ": no such checkpoint folder");
  std::vector<fs::path> folders;
  if (checkpoint::CheckpointStore::is_checkpoint_folder(path)) {
    folders.emplace_back(path);
  } else {
    for (const auto& e : fs::directory_iterator(path, ec))
      if (e.is_directory() && e.path().filename().string().rfind("step_", 0) == 0) folders.push_back(e.path());
    std::sort(folders.begin(), folders.end());
    TUPE_CHECK(!folders.empty(), path << ": neither a checkpoint folder (no manifest.json) nor a checkpoint.dir "
                                         "(no step_<N> folder)");
  }
  const auto t0 = std::chrono::steady_clock::now();
  int64_t bytes = 0, damaged = 0;
  for (const fs::path& f : folders) {
    int64_t b = 0;
    const std::vector<std::string> problems = checkpoint::CheckpointStore::verify_files(f, &b);
    bytes += b;
    damaged += problems.empty() ? 0 : 1;
    for (const std::string& p : problems) log::info(one_line(p));
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  log::info("verify: " + std::to_string(folders.size()) + " checkpoint" + (folders.size() == 1 ? "" : "s") + ": " +
            (damaged ? std::to_string(damaged) + " damaged" : std::string("whole; every file matches its manifest's "
                                                                          "SHA-256")) +
            " (" + rate_text(bytes, s) + ")");
  return damaged ? 1 : 0;
}

int verify_job(const dist::MpiEnv& env, int argc, char** argv) {
  std::vector<std::string> shards;
  std::string checkpoint_path;
  ConfigCli cli("verify",
                "Checks shards before a run: the set is whole (every preprocess run's shards 0..N-1, none of another\n"
                "run), every file's header and datasets agree with what it records, every sample matches its stored\n"
                "CRC-32C. Under mpirun the files are dealt to the ranks (file i to rank i mod W). Or re-hashes a\n"
                "checkpoint against its manifest. Prints one line per damaged file and a summary; exits 1 when\n"
                "anything is damaged, 0 when whole.\n"
                "Example: mpirun -np 4 tupe verify --shards runs/base/shards");
  cli.options().add_options()(
      "shards", po::value<std::vector<std::string>>(&shards)->multitoken()->composing(),
      "shard files or folders (every *.h5 / *.hdf5 of a folder, both splits), as data.train_shards")(
      "checkpoint", po::value<std::string>(&checkpoint_path),
      "a checkpoint folder (step_<N>), or a checkpoint.dir: every step_<N> folder in it");
  bool help = false;
  double heartbeat_timeout_s = 0;
  const std::string parse_error = dist::first_error(env, [&] {
    try {
      help = !cli.parse(argc, argv);
      TUPE_CHECK(help || shards.empty() != checkpoint_path.empty(), "give --shards or --checkpoint (one of them)");
      heartbeat_timeout_s = dist::heartbeat_timeout_from_env();
      return std::string();
    } catch (const Error& e) {
      return std::string(e.what());
    }
  }(), "options");
  if (!parse_error.empty()) throw AgreedError(parse_error);
  if (help) return 0;
  // Verification is the work: ranks wait for the slowest one, and a frozen or lost node ends
  // the job within the heartbeat timeout.
  dist::Heartbeat heartbeat(env, heartbeat_timeout_s, "tupe verify");
  env.end_startup();
  if (!checkpoint_path.empty()) {
    // One process hashes (under mpirun, rank 0); the others agree on its verdict.
    heartbeat.set_activity(env.rank() == 0 ? "hashing the checkpoint" : "waiting for rank 0's checkpoint verdict");
    const int mine = env.rank() == 0 ? verify_checkpoints(checkpoint_path) : 0;
    return static_cast<int>(dist::sum_over_ranks(env, {mine}, "checkpoint verdict").front());
  }
  heartbeat.set_activity("verifying its shards");
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<std::string> files = data_pipeline::list_all_shard_files(shards);
  const auto gather = [&env, &heartbeat](const std::string& mine) {
    heartbeat.set_activity("waiting for the other ranks' verdicts");
    std::vector<std::string> all;  // one broadcast per rank: every rank's verdicts on every rank
    for (int r = 0; r < env.world_size(); ++r) all.push_back(dist::broadcast_string(env, mine, "verdicts", r));
    return all;
  };
  const data_pipeline::VerifyReport report =
      data_pipeline::verify_shard_set(files, env.rank(), env.world_size(), gather);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (const std::string& line : report.lines) log::info(one_line(line));
  log::info(report.summary);
  log::info("verify: read " + rate_text(report.file_bytes, s) + " on " + std::to_string(env.world_size()) + " rank" +
            (env.world_size() == 1 ? "" : "s"));
  return report.damaged() ? 1 : 0;
}

}  // namespace

int run_verify(int argc, char** argv) {
  dist::MpiEnv env(&argc, &argv);
  return run_job_on_ranks(env, "verify", [&] { return verify_job(env, argc, argv); });
}

}  // namespace tupe::cli
