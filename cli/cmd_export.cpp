// tupe export --checkpoint DIR --output OUT [--vocab V] [--format auto|hf|hf-bert|hf-tupe|tupe]
//     [--lower-case auto|true|false]:
// a checkpoint of `tupe pretrain` or a model of `tupe finetune` as a Hugging Face folder
// (BERT-A: transformers' BERT; every other variant: tupe's modeling code, loaded with
// trust_remote_code=True) with the tokenizer files, or as safetensors + a JSON config naming
// every tensor. Layouts: tools/export/export.h.
#include <boost/program_options/options_description.hpp>
#include <boost/program_options/value_semantic.hpp>
#include <iostream>
#include <string>

#include "cli/commands.h"
#include "cli/config_cli.h"
#include "common/error.h"
#include "common/log.h"
#include "tools/export/export.h"

namespace po = boost::program_options;

namespace tupe::cli {

int run_export(int argc, char** argv) {
  std::string checkpoint, output, vocab, format = "auto", lower_case = "auto";
  ConfigCli cli("export",
                "Exports a checkpoint of tupe pretrain (MLM head) or a model of tupe finetune (sentence head) as a\n"
                "Hugging Face folder with the tokenizer files AutoTokenizer loads. BERT-A (bert-absolute, post-LN)\n"
                "-> transformers' BertForMaskedLM / BertForSequenceClassification; every other variant (TUPE-A/R,\n"
                "BERT-R, pre-LN) -> tupe's own modeling code (TupeForMaskedLM, TupeForSequenceClassification,\n"
                "TupeModel), loaded with from_pretrained(OUT, trust_remote_code=True). --format tupe writes\n"
                "model.safetensors with tupe's names + config.json naming every tensor.");
  cli.options().add_options()("checkpoint", po::value<std::string>(&checkpoint),
                              "checkpoint folder step_XXXXXXXX, or a checkpoint.dir (the newest whole one)")(
      "output", po::value<std::string>(&output), "folder to create (must not exist)")(
      "vocab", po::value<std::string>(&vocab),
      "vocab.txt (WordPiece) or .model (SentencePiece) for the tokenizer files (default: the one the checkpoint "
      "carries, else its tokenizer.vocab when readable); its SHA-256 must match the checkpoint's")(
      "format", po::value<std::string>(&format)->default_value("auto"),
      "auto = hf: transformers' BERT for BERT-A (post-LN), else tupe's modeling code; hf-bert (refused for "
      "other variants); hf-tupe (tupe's modeling code for any variant, BERT-A included); tupe (tupe's names)")(
      "lower-case", po::value<std::string>(&lower_case)->default_value("auto"),
      "WordPiece lower-casing (do_lower_case): auto (the checkpoint's tokenizer record; older checkpoints: "
      "its tokenizer.lower_case, else what its training shards record), true, false (refused when it "
      "contradicts the record)");
  if (!cli.parse(argc, argv)) return 0;
  TUPE_CHECK(!checkpoint.empty(), "export: no checkpoint given (--checkpoint DIR)");
  TUPE_CHECK(!output.empty(), "export: no output folder given (--output OUT)");
  exporting::ExportOptions options;
  options.checkpoint = checkpoint;
  options.output = output;
  options.vocab = vocab;
  options.format = exporting::parse_export_format("--format", format);
  options.lower_case = exporting::parse_lower_case("--lower-case", lower_case);
  const auto result = exporting::export_checkpoint(options);
  log::info("exported " + result.checkpoint.string() + " -> " + output + " (format " +
            exporting::to_string(result.format) + (result.architecture.empty() ? "" : ", " + result.architecture) +
            ")");
  if (result.vocab.empty())
    log::warn("export: no vocabulary known, so no tokenizer files were written (give --vocab)");
  else
    log::info("vocabulary " + result.vocab.string());
  log::info(result.note);
  return 0;
}

}  // namespace tupe::cli
