// tupe vocab --vocab.input a.txt,b.txt --vocab.model out.model: trains a SentencePiece
// vocabulary (unigram or BPE) with [PAD] [UNK] [CLS] [SEP] [MASK] at ids 0-4, for
// `tupe preprocess --tokenizer.kind sentencepiece --tokenizer.vocab out.model`.
#include <iostream>

#include "cli/commands.h"
#include "cli/config_cli.h"
#include "data_pipeline/text/sentencepiece_train.h"

namespace tupe::cli {

int run_vocab(int argc, char** argv) {
  data_pipeline::VocabOptions options;
  ConfigCli cli("vocab",
                "Trains a SentencePiece vocabulary on UTF-8 text files; [PAD] [UNK] [CLS] [SEP] [MASK] get ids 0-4.");
  cli.section("vocab", data_pipeline::VocabOptions::fields(), options);
  if (!cli.parse(argc, argv)) return 0;
  options.validate();
  std::cout << "# effective config\n";
  cli.print_effective(std::cout);
  const data_pipeline::SentencePieceTrainResult r = data_pipeline::train_sentencepiece(options);
  std::cout << "\n# trained\nmodel = " << r.model_path << "\npieces = " << r.vocab_path
            << "\nvocab_size = " << r.vocab_size << "\nvocab_sha256 = " << r.sha256 << "\nspecial ids = [PAD] "
            << data_pipeline::SentencePieceReservedIds::kPad << ", [UNK] "
            << data_pipeline::SentencePieceReservedIds::kUnk << ", [CLS] "
            << data_pipeline::SentencePieceReservedIds::kCls << ", [SEP] "
            << data_pipeline::SentencePieceReservedIds::kSep << ", [MASK] "
            << data_pipeline::SentencePieceReservedIds::kMask << "\n";
  return 0;
}

}  // namespace tupe::cli
