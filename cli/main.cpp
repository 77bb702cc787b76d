// tupe: pre-training and fine-tuning of TUPE-BERT. `tupe <subcommand> --help` for each.
#include <cstring>
#include <exception>
#include <iostream>

#include "cli/commands.h"
#include "common/error.h"

namespace {

// Keep in the order a user meets them.
const tupe::cli::Command kCommands[] = {
    {"info", "print a model config and its parameter table", tupe::cli::run_info},
};

void usage(std::ostream& os) {
  os << "Usage: tupe <subcommand> [--config FILE] [options]\n\nSubcommands:\n";
  for (const auto& c : kCommands) os << "  " << c.name << std::string(12 - std::strlen(c.name), ' ') << c.summary << "\n";
  os << "\n`tupe <subcommand> --help` lists every option with its unit and default.\n";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    usage(argc < 2 ? std::cerr : std::cout);
    return argc < 2 ? 2 : 0;
  }
  for (const auto& c : kCommands) {
    if (std::strcmp(argv[1], c.name) != 0) continue;
    try {
      return c.run(argc - 1, argv + 1);
    } catch (const tupe::Error& e) {
      std::cerr << "tupe " << c.name << ": error: " << e.what() << "\n";
      return 1;
    } catch (const std::exception& e) {
      std::cerr << "tupe " << c.name << ": internal error: " << e.what() << "\n";
      return 3;
    }
  }
  std::cerr << "tupe: unknown subcommand '" << argv[1] << "'\n";
  usage(std::cerr);
  return 2;
}
