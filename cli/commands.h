// The subcommands of the `tupe` executable. Each is a thin layer: it parses options
// (cli/config_cli.h) and calls the libraries. Each returns the process exit code.
#pragma once
#include <iosfwd>
#include <span>

namespace tupe::cli {

struct Command {
  const char* name;
  const char* summary;
  int (*run)(int argc, char** argv);  ///< argv[0] is the subcommand word
};

/// Every subcommand, in the order a user meets them (main.cpp).
std::span<const Command> commands();
/// The top-level usage: every subcommand with its summary (`tupe --help`, `tupe help`).
void usage(std::ostream& os);

int run_info(int argc, char** argv);
int run_preprocess(int argc, char** argv);
int run_verify(int argc, char** argv);
int run_vocab(int argc, char** argv);
int run_pretrain(int argc, char** argv);
int run_finetune(int argc, char** argv);
int run_evaluate(int argc, char** argv);
int run_export(int argc, char** argv);
int run_predict(int argc, char** argv);
int run_analyze(int argc, char** argv);
int run_help(int argc, char** argv);

}  // namespace tupe::cli
