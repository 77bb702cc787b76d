// tupe help [SUBCOMMAND | --config-reference]: the usage, one subcommand's --help, or the
// reference of every config key (docs/config-reference.md is that output).
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/config_cli.h"
#include "common/error.h"
#include "common/nearest.h"

namespace tupe::cli {

int run_help(int argc, char** argv) {
  if (argc == 1) {
    usage(std::cout);
    return 0;
  }
  TUPE_CHECK(argc == 2, "expected one word (a subcommand, or --config-reference), got " << argc - 1);
  const std::string what = argv[1];
  if (what == "--config-reference") {
    write_config_reference(std::cout);
    return 0;
  }
  if (what == "--help" || what == "-h") {
    std::cout << "Usage: tupe help [SUBCOMMAND | --config-reference]\n"
                 "  tupe help SUBCOMMAND        the same as tupe SUBCOMMAND --help\n"
                 "  tupe help --config-reference every config key: type, unit, default, range, meaning (Markdown)\n";
    return 0;
  }
  std::vector<std::string> words{"--config-reference"};
  for (const auto& c : commands()) {
    if (what == c.name && what != "help") {
      char help[] = "--help";
      char* args[] = {argv[1], help, nullptr};
      return c.run(2, args);
    }
    words.emplace_back(c.name);
  }
  TUPE_FAIL("unknown subcommand '" << what << "'" << did_you_mean(what, words)
                                         << " (expected a subcommand or --config-reference)");
}

}  // namespace tupe::cli
