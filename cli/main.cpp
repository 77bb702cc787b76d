// tupe: pre-training and fine-tuning of TUPE-BERT. `tupe <subcommand> --help` for each.
#include <cstring>
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include <c10/util/Exception.h>

#include "cli/commands.h"
#include "cli/rank_guard.h"
#include "common/build_info.h"
#include "common/error.h"
#include "common/host_memory.h"
#include "common/log.h"
#include "common/nearest.h"

namespace tupe::cli {

namespace {
// Keep in the order a user meets them.
const Command kCommands[] = {
    {"vocab", "train a SentencePiece vocabulary (unigram or BPE) on text files", run_vocab},
    {"preprocess", "tokenise text files and pack them into HDF5 shards", run_preprocess},
    {"verify", "check shards (whole set, headers, every sample's checksum) or a checkpoint, under mpirun too",
     run_verify},
    {"pretrain", "pre-train TUPE-BERT (MLM) data-parallel under mpirun, with checkpoints", run_pretrain},
    {"finetune", "fine-tune a checkpoint on GLUE (LR grid x seeds, median per LR), submission files", run_finetune},
    {"evaluate", "GLUE dev metrics and submission files of a fine-tuned model", run_evaluate},
    {"export", "a checkpoint as a Hugging Face folder (every variant; BERT-A as BertForMaskedLM) or safetensors + JSON",
     run_export},
    {"predict", "fill-mask top-k and embeddings (safetensors) of a checkpoint on text lines, CPU or GPU", run_predict},
    {"analyze", "positional heatmaps, position-embedding probes, loss/LR curves of a checkpoint", run_analyze},
    {"info", "print a model config and its parameter table (--version: what this tupe was built with)", run_info},
    {"help", "help SUBCOMMAND = SUBCOMMAND --help; help --config-reference: every config key", run_help},
};
}  // namespace

std::span<const Command> commands() { return kCommands; }

void usage(std::ostream& os) {
  os << "Usage: tupe <subcommand> [--config FILE] [options]\n       tupe --version\n\nSubcommands:\n";
  for (const auto& c : kCommands) os << "  " << c.name << std::string(12 - std::strlen(c.name), ' ') << c.summary << "\n";
  os << "\n`tupe <subcommand> --help` lists every option with its unit and default.\n";
}

}  // namespace tupe::cli

int main(int argc, char** argv) {
  using tupe::cli::commands;
  tupe::keep_freed_host_memory();  // before any thread or large tensor exists
  tupe::log::record_launcher_at_start();  // before MPI_Init, which may set PMIX_RANK itself
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    tupe::cli::usage(argc < 2 ? std::cerr : std::cout);
    return argc < 2 ? 2 : 0;
  }
  if (!std::strcmp(argv[1], "--version") && argc == 2) {
    std::cout << tupe::build_info_text();
    return 0;
  }
  for (const auto& c : commands()) {
    if (std::strcmp(argv[1], c.name) != 0) continue;
    try {
      return c.run(argc - 1, argv + 1);
    } catch (const tupe::Error& e) {
      tupe::log::error(c.name, "error", tupe::cli::one_line(e.what()), false);
      return 1;
    } catch (const c10::Error& e) {  // a LibTorch check: its message without the C++ backtrace
      tupe::log::error(c.name, "error", tupe::cli::one_line(e.what_without_backtrace()), false);
      return 3;
    } catch (const std::exception& e) {
      tupe::log::error(c.name, "internal error", tupe::cli::one_line(e.what()), false);
      return 3;
    }
  }
  std::vector<std::string> names;
  for (const auto& c : commands()) names.emplace_back(c.name);
  const std::string near = tupe::did_you_mean(argv[1], names);
  tupe::log::error("", "error",
                   std::string(argv[1][0] == '-' ? "unknown option '" : "unknown subcommand '") + argv[1] + "'" +
                       (near.empty() ? " (" : near.substr(0, near.size() - 1) + "; ") + "tupe --help lists them)",
                   false);
  return 2;
}
