// tupe info --config FILE: the effective model config and its parameter table.
// tupe info --version: the commit, build type and library versions of this build.
#include <cstdio>
#include <iostream>

#include "cli/commands.h"
#include "cli/config_cli.h"
#include "common/build_info.h"
#include "model/tupe_bert.h"

namespace tupe::cli {

int run_info(int argc, char** argv) {
  model::ModelOptions config;
  ConfigCli cli("info", "Prints the effective model config and a parameter table (no weights are loaded).");
  cli.options().add_options()("version",
                              "print the commit, build type and the LibTorch, CUDA, NCCL, Open MPI and HDF5 versions "
                              "this tupe was built with (as tupe --version), and exit");
  cli.section("model", model::ModelOptions::fields(), config);
  if (!cli.parse(argc, argv)) return 0;
  if (cli.vm().count("version")) {
    std::cout << build_info_text();
    return 0;
  }
  config.validate();
  std::cout << "# effective config\n";
  cli.print_effective(std::cout);
  // model.vocab_size = 0 is the shards' size, known to pre-training only: count BERT's.
  constexpr int64_t kBertVocabSize = 30522;
  const bool shards_vocab = config.vocab_size == 0;
  if (shards_vocab) config.vocab_size = kBertVocabSize;
  model::TupeBert net(config);
  std::cout << "\n# parameters (" << model::to_string(config.position_encoding)
            << (config.untie_cls ? ", [CLS] untied" : "")
            << (shards_vocab ? ", vocab_size 0 = the shards': counted for BERT's 30522" : "") << ")\n";
  const auto rows = model::parameter_table(*net);
  const int64_t total = rows.back().numel;
  std::printf("%-26s %14s %8s\n", "group", "parameters", "share");
  for (const auto& r : rows) {
    if (r.name == "total") std::printf("%s\n", std::string(50, '-').c_str());
    std::printf("%-26s %14lld %7.2f%%\n", r.name.c_str(), static_cast<long long>(r.numel),
                100.0 * static_cast<double>(r.numel) / static_cast<double>(total));
  }
  return 0;
}

}  // namespace tupe::cli
