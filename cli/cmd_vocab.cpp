// tupe vocab --vocab.input CORPUS --vocab.model out/spm.model: trains a SentencePiece
// vocabulary (unigram or BPE) with [PAD] [UNK] [CLS] [SEP] [MASK] at ids 0-4 on what
// `tupe preprocess` reads (text or JSON lines, plain, gzip or zstd, folders of them), for
// `tupe preprocess --tokenizer.vocab out/spm.model` (the kind is read from the file). Its lines
// are log records (flushed when written); after success the effective config goes to
// effective_config.ini beside the model (data_pipeline/sentencepiece_train.h).
#include <filesystem>

#include "cli/commands.h"
#include "cli/config_cli.h"
#include "common/log.h"
#include "data_pipeline/sentencepiece_train.h"

namespace tupe::cli {

int run_vocab(int argc, char** argv) {
  data_pipeline::VocabOptions options;
  ConfigCli cli("vocab",
                "Trains a SentencePiece vocabulary on text or JSON-lines files (plain, gzip or zstd; or folders of\n"
                "them), as tupe preprocess reads them; [PAD] [UNK] [CLS] [SEP] [MASK] get ids 0-4.\n"
                "Example: tupe vocab --vocab.input corpus/ --vocab.model runs/spm/spm.model --vocab.vocab_size 16000");
  cli.section("vocab", data_pipeline::VocabOptions::fields(), options);
  if (!cli.parse(argc, argv)) return 0;
  options.validate();
  using Ids = data_pipeline::SentencePieceReservedIds;
  const data_pipeline::SentencePieceTrainResult r = data_pipeline::train_sentencepiece(options);
  log::info("vocab: wrote " + r.model_path + " (" + std::to_string(r.vocab_size) + " pieces, vocab_sha256 " + r.sha256 +
            ") and its listing " + r.vocab_path + "; special ids = [PAD] " + std::to_string(Ids::kPad) + ", [UNK] " +
            std::to_string(Ids::kUnk) + ", [CLS] " + std::to_string(Ids::kCls) + ", [SEP] " +
            std::to_string(Ids::kSep) + ", [MASK] " + std::to_string(Ids::kMask));
  // After success only (a failed run leaves no model and no config), as preprocess does.
  const std::filesystem::path model(r.model_path);
  const std::filesystem::path folder = model.has_parent_path() ? model.parent_path() : std::filesystem::path(".");
  log::info(cli.write_effective((folder / "effective_config.ini").string()));
  log::info("next: tupe preprocess --tokenizer.vocab " + r.model_path + " --input <corpus> --output <shard folder>");
  return 0;
}

}  // namespace tupe::cli
