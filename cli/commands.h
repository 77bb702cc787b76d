// The subcommands of the `tupe` executable. Each is a thin layer: it parses options
// (cli/config_cli.h) and calls the libraries. Each returns the process exit code.
#pragma once

namespace tupe::cli {

struct Command {
  const char* name;
  const char* summary;
  int (*run)(int argc, char** argv);  ///< argv[0] is the subcommand word
};

int run_info(int argc, char** argv);
int run_preprocess(int argc, char** argv);
int run_vocab(int argc, char** argv);
int run_pretrain(int argc, char** argv);
int run_finetune(int argc, char** argv);
int run_evaluate(int argc, char** argv);
int run_export(int argc, char** argv);
int run_predict(int argc, char** argv);
int run_analyze(int argc, char** argv);

}  // namespace tupe::cli
