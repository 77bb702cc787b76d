// tupe preprocess: raw text -> tokenised, packed HDF5 shards (data_pipeline/preprocess.h), alone
// or under mpirun (the output is byte-identical for any rank count). This file parses the
// options; the run and its commit protocol are data_pipeline/preprocess_commit.h, to which it
// gives the ranks through cli/mpi_agreement.h. Usage:
//   [mpirun -np W] tupe preprocess --input FILE_OR_FOLDER [...] --output DIR
//       --tokenizer.vocab vocab.txt [--preprocess.max_seq_len 128 ...]
#include <boost/program_options/value_semantic.hpp>
#include <filesystem>

#include "cli/commands.h"
#include "cli/config_cli.h"
#include "cli/mpi_agreement.h"
#include "cli/rank_guard.h"
#include "common/log.h"
#include "data_pipeline/preprocess_commit.h"
#include "dist/heartbeat.h"
#include "dist/mpi_env.h"

namespace po = boost::program_options;

namespace tupe::cli {

namespace {

int preprocess_job(const dist::MpiEnv& env, int argc, char** argv) {
  data_pipeline::PreprocessOptions config;
  data_pipeline::TokenizerOptions tokenizer;
  data_pipeline::PreprocessRequest request;
  ConfigCli cli("preprocess",
                "Tokenises text or JSON-lines files (plain, gzip or zstd), Parquet or Arrow IPC files (a datasets "
                "save_to_disk folder too), or folders of them, and packs them into HDF5 shards.\n"
                "Under mpirun the shard files are dealt to ranks; the result does not depend on the rank count.");
  cli.section("preprocess", data_pipeline::PreprocessOptions::fields(), config);
  cli.section("tokenizer", data_pipeline::TokenizerOptions::fields(), tokenizer);
  cli.options().add_options()(
      "input", po::value<std::vector<std::string>>(&request.inputs)->multitoken()->composing(),
      "text or JSON-lines files (plain, gzip or zstd), Parquet or Arrow files, or folders of them (searched "
      "recursively), one or more")(
      "output", po::value<std::string>(&request.output), "folder for the shards (created if missing)")(
      "overwrite", "replace shards already in the output folder (stale ones are removed after success)")(
      "quiet", "no progress lines");
  MpiAgreement ranks(env);
  bool help = false;
  data_pipeline::run_agreed(ranks, [&] {  // one message, not one per rank
    help = !cli.parse(argc, argv);
    // tokenizer.kind, when not set, is the vocabulary file's (text: wordpiece, a model:
    // sentencepiece); effective_config.ini then records what was used.
    if (!help && !tokenizer.vocab.empty())
      tokenizer.kind = data_pipeline::resolve_tokenizer_kind(tokenizer, cli.given().count("tokenizer.kind") > 0);
  });
  if (help) return 0;
  // Past start-up, a frozen or lost node ends the job within the heartbeat timeout.
  double heartbeat_timeout_s = 0;
  data_pipeline::run_agreed(ranks, [&] { heartbeat_timeout_s = dist::heartbeat_timeout_from_env(); });
  dist::Heartbeat heartbeat(env, heartbeat_timeout_s, "tupe preprocess");
  ranks.set_heartbeat(&heartbeat);
  request.overwrite = cli.vm().count("overwrite") > 0;
  request.quiet = cli.vm().count("quiet") > 0;
  request.command_line = "tupe";
  for (int i = 0; i < argc; ++i) request.command_line += std::string(" ") + argv[i];
  request.on_success = [&](const data_pipeline::PreprocessSummary& summary) {
    log::info(data_pipeline::summary_line(summary, config, request.output));
    // The effective config next to the shards, after success only (a failed run leaves nothing).
    log::info(cli.write_effective((std::filesystem::path(request.output) / "effective_config.ini").string()));
  };
  data_pipeline::run_preprocess(request, config, tokenizer, ranks);
  return 0;
}

}  // namespace

int run_preprocess(int argc, char** argv) {
  dist::MpiEnv env(&argc, &argv);
  return run_job_on_ranks(env, "preprocess", [&] { return preprocess_job(env, argc, argv); });
}

}  // namespace tupe::cli
