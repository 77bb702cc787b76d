// tupe predict --checkpoint DIR --mode fill-mask|embeddings [--input FILE|-] [--output FILE|-]
//     [--vocab V] [--lower-case auto|true|false] [--top-k 5] [--format jsonl|tsv]
//     [--pooling cls|tokens] [--batch-size 32] [--device auto|cpu|cuda] [--precision fp32|bf16]:
// the forward pass of a checkpoint on text lines, in one process (no mpirun). The work is
// tools/predict/predict.h (formats there); this file parses its options.
#include <boost/program_options/options_description.hpp>
#include <boost/program_options/value_semantic.hpp>
#include <cstdlib>
#include <iostream>
#include <string>

#include "cli/commands.h"
#include "cli/config_cli.h"
#include "common/error.h"
#include "common/log.h"
#include "tools/predict/predict.h"

namespace po = boost::program_options;

namespace tupe::cli {

int run_predict(int argc, char** argv) {
  predict::PredictOptions o;
  std::string checkpoint, vocab, mode, lower_case, format, pooling, device, precision;
  ConfigCli cli("predict",
                "Runs a checkpoint of tupe pretrain (MLM head) or a model of tupe finetune on text lines (one per line),\n"
                "batched, on the CPU or one GPU, in one process.\n"
                "  fill-mask   top-k tokens and probabilities at each literal [MASK] of a line (needs an MLM head);\n"
                "              JSONL (default) or TSV to --output (default stdout)\n"
                "  embeddings  the [CLS] vector (--pooling cls, (N, d)) or the last hidden states (--pooling tokens,\n"
                "              (N, L, d)) with input_ids and attention_mask, to a .safetensors file\n"
                "A line without [MASK] (fill-mask), longer than the model's max_positions after tokenisation, or\n"
                "blank is an error naming the file and line; nothing is written then.");
  cli.options().add_options()("checkpoint", po::value<std::string>(&checkpoint),
                              "checkpoint folder step_XXXXXXXX, or a folder of them (the newest whole one)")(
      "mode", po::value<std::string>(&mode), "fill-mask | embeddings")(
      "input", po::value<std::string>(&o.input)->default_value("-"), "text file, one input per line; - = stdin")(
      "output", po::value<std::string>(&o.output)->default_value("-"),
      "fill-mask: file or - (stdout); embeddings: the .safetensors file to write")(
      "vocab", po::value<std::string>(&vocab),
      "vocab.txt (WordPiece) or .model (SentencePiece) the checkpoint was trained with (default: the one the "
      "checkpoint carries, else its tokenizer.vocab when readable); its SHA-256 must match the checkpoint's")(
      "lower-case", po::value<std::string>(&lower_case)->default_value("auto"),
      "lower-casing: auto (the checkpoint's tokenizer record; older checkpoints: its tokenizer.lower_case, "
      "else its training shards'), true, false (refused when it contradicts the record)")(
      "top-k", po::value<int64_t>(&o.top_k)->default_value(5), "fill-mask: predictions per [MASK]")(
      "format", po::value<std::string>(&format)->default_value("jsonl"), "fill-mask output: jsonl | tsv")(
      "pooling", po::value<std::string>(&pooling)->default_value("cls"),
      "embeddings: cls (the [CLS] vector, (N, d)) | tokens (last hidden states, (N, L, d), 0 at padding)")(
      "batch-size", po::value<int64_t>(&o.batch_size)->default_value(32), "lines per forward pass")(
      "device", po::value<std::string>(&device)->default_value("auto"),
      "auto (cuda:0 when a GPU is visible) | cpu | cuda")(
      "precision", po::value<std::string>(&precision)->default_value("fp32"), "fp32 | bf16 (autocast)")(
      "threads", po::value<int64_t>(&o.threads)->default_value(0), "intra-op CPU threads (0 = LibTorch's default)");
  if (!cli.parse(argc, argv)) return 0;
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}) {
    const char* size = std::getenv(var);
    TUPE_CHECK(size == nullptr || std::string(size) == "1",
               "predict runs as one process, not under mpirun (" << var << " = " << size << ")");
  }
  TUPE_CHECK(!mode.empty(), "predict: no mode given (--mode fill-mask|embeddings)");
  o.mode = predict::parse_predict_mode("--mode", mode);
  o.lower_case = exporting::parse_lower_case("--lower-case", lower_case);
  o.pooling = predict::parse_pooling("--pooling", pooling);
  o.device = dist::parse_device_request(device, "--device");
  o.format = predict::parse_fill_mask_format("--format", format);
  o.precision = predict::parse_predict_precision("--precision", precision);
  o.checkpoint = checkpoint;
  o.vocab = vocab;
  if (o.output == "-") log::send_info_to_stderr(true);  // stdout carries the predictions
  const auto s = predict::run_predict(o, std::cin, std::cout);
  log::info("predict: " + std::to_string(s.lines) + " line(s)" +
            (o.mode == predict::PredictMode::kFillMask ? ", " + std::to_string(s.masks) + " [MASK]" : "") +
            ", longest " + std::to_string(s.max_tokens) + " tokens, " + s.checkpoint.string() + " on " +
            s.device.str() + ", vocabulary " + s.vocab.string() +
            (o.output == "-" ? std::string() : " -> " + o.output));
  return 0;
}

}  // namespace tupe::cli
