// tupe export --checkpoint DIR --output OUT [--vocab vocab.txt] [--format auto|hf|tupe]:
// a pre-training checkpoint as a HuggingFace BertForMaskedLM folder (BERT-A) or as
// safetensors + a JSON config naming every tensor (TUPE-A/R, BERT-R: HF has no such
// architecture). Layouts: trainer/export/export.h.
#include <boost/program_options/options_description.hpp>
#include <boost/program_options/value_semantic.hpp>
#include <iostream>
#include <string>

#include "cli/commands.h"
#include "cli/config_cli.h"
#include "common/error.h"
#include "trainer/export/export.h"

namespace po = boost::program_options;

namespace tupe::cli {

int run_export(int argc, char** argv) {
  std::string checkpoint, output, vocab, format = "auto";
  ConfigCli cli("export",
                "Exports a pre-training checkpoint. BERT-A (bert-absolute, post-LN) -> a folder HuggingFace\n"
                "transformers loads as BertForMaskedLM (config.json, model.safetensors with HF names,\n"
                "vocab.txt). TUPE-A/R and BERT-R -> model.safetensors with tupe's names + config.json naming\n"
                "every tensor (transformers has no TUPE architecture).");
  cli.options().add_options()("checkpoint", po::value<std::string>(&checkpoint),
                              "checkpoint folder step_XXXXXXXX, or a checkpoint.dir (the newest whole one)")(
      "output", po::value<std::string>(&output), "folder to create (must not exist)")(
      "vocab", po::value<std::string>(&vocab),
      "vocabulary to copy (default: the checkpoint's tokenizer.vocab when readable); its SHA-256 must match")(
      "format", po::value<std::string>(&format)->default_value("auto"),
      "auto (hf for BERT-A, else tupe), hf (refused for non-BERT-A), tupe");
  if (!cli.parse(argc, argv)) return 0;
  TUPE_CHECK(!checkpoint.empty(), "export: no checkpoint given (--checkpoint DIR)");
  TUPE_CHECK(!output.empty(), "export: no output folder given (--output OUT)");
  exporting::ExportOptions options;
  options.checkpoint = checkpoint;
  options.output = output;
  options.vocab = vocab;
  options.format = format;
  const auto result = exporting::export_checkpoint(options);
  std::cout << "exported " << result.checkpoint.string() << " -> " << output << " (format " << result.format << ")\n"
            << (result.vocab.empty() ? std::string("no vocabulary copied (give --vocab)") : "vocabulary " + result.vocab.string())
            << "\n" << result.note << "\n";
  return 0;
}

}  // namespace tupe::cli
