#include "data_pipeline/text/sentencepiece_train.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <unordered_map>

#include "common/error.h"
#include "common/sha256.h"
#include "data_pipeline/text/utf8.h"

namespace tupe::data_pipeline {

namespace {

/// Writes `bytes` to `path` through "<path>.tmp" + rename.
void write_atomically(const std::string& path, const std::string& bytes) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    TUPE_CHECK(out.good(), tmp << ": cannot create: " << std::strerror(errno));
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.flush();
    if (!out.good()) {
      std::remove(tmp.c_str());
      TUPE_FAIL(tmp << ": write failed");
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::remove(tmp.c_str());
    TUPE_FAIL(path << ": cannot rename from " << tmp << ": " << ec.message());
  }
}

std::string vocab_listing_path(const std::string& model) {
  const std::string suffix = ".model";
  if (model.size() > suffix.size() && model.compare(model.size() - suffix.size(), suffix.size(), suffix) == 0)
    return model.substr(0, model.size() - suffix.size()) + ".vocab";
  return model + ".vocab";
}

}  // namespace

std::string to_string(SentencePieceModelType t) { return choice_word(t, kModelTypeWords); }

SentencePieceModelType parse_sentencepiece_model_type(const std::string& key, const std::string& text) {
  return parse_choice(key, text, kModelTypeWords);
}

void VocabOptions::check_values() const { fields().check(*this); }

void VocabOptions::validate() const {
  TUPE_CHECK(!split_comma_list(input).empty(), "vocab.input: no input file given");
  TUPE_CHECK(!model.empty(), "vocab.model: no output path given");
  check_values();
}

const FieldTable<VocabOptions>& VocabOptions::fields() {
  using S = VocabOptions;
  static const FieldTable<S> table = [] {
    FieldTable<S> t("vocab");
    t.path_list("input", &S::input, "", "UTF-8 text files, comma-separated (one sentence or paragraph a line)")
        .path("model", &S::model, "", "output SentencePiece .model path (the piece list goes to <stem>.vocab)")
        .integer("vocab_size", &S::vocab_size, 8000, "ids",
                 "pieces in the model, the 5 special tokens included (> 5, fits int32)")
        .above(5)
        .below(2147483648.0)
        .choice("model_type", &S::model_type, kModelTypeWords, SentencePieceModelType::kUnigram,
                "the SentencePiece model trained")
        .boolean("lower_case", &S::lower_case, true, "fold case (SentencePiece rule nmt_nfkc_cf; else nmt_nfkc)")
        .real("character_coverage", &S::character_coverage, 0.9995, "fraction",
              "of the corpus' characters kept as pieces")
        .at_least(0.98)
        .at_most(1)
        .integer("max_sentence_bytes", &S::max_sentence_bytes, 16384, "bytes", "longer lines are skipped in training")
        .positive()
        .integer("input_sentence_size", &S::input_sentence_size, 0, "lines", "sampled for training; 0 = all")
        .at_least(0)
        .integer("num_threads", &S::num_threads, 1, "", "trainer threads")
        .at_least(1)
        .at_most(1024)
        .integer("seed", &S::seed, 1234, "", "random seed of SentencePiece's line sampling")
        .at_least(0)
        .below(4294967296.0);
    return t;
  }();
  return table;
}

SentencePieceTrainResult train_sentencepiece(const VocabOptions& options) {
  options.validate();
  const std::vector<std::string> inputs = split_comma_list(options.input);
  for (const auto& file : inputs) validate_utf8_file(file);

  std::unordered_map<std::string, std::string> args = {
      {"input", options.input},
      {"model_prefix", ""},  // nothing written by SentencePiece: the model comes back serialised
      {"vocab_size", std::to_string(options.vocab_size)},
      {"model_type", to_string(options.model_type)},
      {"character_coverage", std::to_string(options.character_coverage)},
      {"normalization_rule_name", options.lower_case ? "nmt_nfkc_cf" : "nmt_nfkc"},
      {"max_sentence_length", std::to_string(options.max_sentence_bytes)},
      {"input_sentence_size", std::to_string(options.input_sentence_size)},
      {"shuffle_input_sentence", "true"},
      {"num_threads", std::to_string(options.num_threads)},
      {"pad_id", std::to_string(SentencePieceReservedIds::kPad)},
      {"pad_piece", "[PAD]"},
      {"unk_id", std::to_string(SentencePieceReservedIds::kUnk)},
      {"unk_piece", "[UNK]"},
      {"bos_id", std::to_string(SentencePieceReservedIds::kCls)},
      {"bos_piece", "[CLS]"},
      {"eos_id", std::to_string(SentencePieceReservedIds::kSep)},
      {"eos_piece", "[SEP]"},
      {"control_symbols", "[MASK]"},  // the next free id: 4
      {"minloglevel", "1"},           // warnings and errors only
  };
  sentencepiece::SetRandomGeneratorSeed(static_cast<unsigned int>(options.seed));
  std::string serialized;
  const auto status = sentencepiece::SentencePieceTrainer::Train(args, nullptr, &serialized);
  TUPE_CHECK(status.ok(), options.model << ": SentencePiece training failed: " << status.ToString());
  TUPE_CHECK(!serialized.empty(), options.model << ": SentencePiece training returned no model");

  // Check the reserved ids on the model itself before anything is written.
  sentencepiece::SentencePieceProcessor sp;
  const auto loaded = sp.LoadFromSerializedProto(serialized);
  TUPE_CHECK(loaded.ok(), options.model << ": trained model does not load: " << loaded.ToString());
  const std::pair<const char*, int32_t> reserved[] = {{"[PAD]", SentencePieceReservedIds::kPad},
                                                      {"[UNK]", SentencePieceReservedIds::kUnk},
                                                      {"[CLS]", SentencePieceReservedIds::kCls},
                                                      {"[SEP]", SentencePieceReservedIds::kSep},
                                                      {"[MASK]", SentencePieceReservedIds::kMask}};
  for (const auto& [piece, id] : reserved)
    TUPE_CHECK(sp.IdToPiece(id) == piece, options.model << ": trained model has '" << sp.IdToPiece(id) << "' at id " << id
                                                        << ", expected " << piece);

  SentencePieceTrainResult result;
  result.model_path = options.model;
  result.vocab_path = vocab_listing_path(options.model);
  result.vocab_size = sp.GetPieceSize();
  std::string listing;
  for (int id = 0; id < sp.GetPieceSize(); ++id) {
    listing += sp.IdToPiece(id);
    listing += '\t';
    listing += std::to_string(sp.GetScore(id));
    listing += '\n';
  }
  write_atomically(result.vocab_path, listing);
  write_atomically(result.model_path, serialized);
  result.sha256 = sha256_hex(serialized);
  return result;
}

}  // namespace tupe::data_pipeline
