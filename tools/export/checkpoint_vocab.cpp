#include "tools/export/checkpoint_vocab.h"

#include <fstream>
#include <optional>

#include "common/config_fields.h"
#include "common/error.h"
#include "common/sha256.h"
#include "data_pipeline/dataset.h"
#include "data_pipeline/hdf5_util.h"
#include "data_pipeline/loader_config.h"
#include "data_pipeline/shard_format.h"
#include "tools/export/hf_tokenizer.h"

namespace tupe::exporting {
namespace fs = std::filesystem;

namespace {

int64_t count_lines(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  TUPE_CHECK(in, path.string() << ": cannot read");
  int64_t n = 0;
  std::string line;
  while (std::getline(in, line)) ++n;
  return n;
}

std::string saved_key(const checkpoint::ModelCheckpoint& ckpt, const std::string& key) {
  const auto it = ckpt.contents.state.config.find(key);
  return it == ckpt.contents.state.config.end() ? "" : it->second;
}

}  // namespace

fs::path pick_checkpoint_vocab(const fs::path& option, const checkpoint::ModelCheckpoint& ckpt) {
  if (!option.empty()) {
    TUPE_CHECK(fs::is_regular_file(option), "--vocab " << option.string() << ": no such file");
    return option;
  }
  if (const fs::path carried = ckpt.carried_vocab(); !carried.empty()) return carried;
  const std::string saved = saved_key(ckpt, "tokenizer.vocab");
  if (!saved.empty() && fs::is_regular_file(saved)) return saved;
  return {};
}

void check_checkpoint_vocab(const fs::path& vocab, const checkpoint::ModelCheckpoint& ckpt) {
  const std::string& saved = ckpt.contents.state.vocab_sha256;
  const std::string actual = file_sha256_hex(vocab.string());
  TUPE_CHECK(saved.empty() || saved == actual, vocab.string() << ": vocabulary sha256 " << actual
                                                   << " differs from the checkpoint's " << saved << " (" << ckpt.dir.string() << ")");
  if (tokenizer_kind_of(vocab) == data_pipeline::TokenizerKind::kSentencePiece) {
    const auto pieces = static_cast<int64_t>(read_sentencepiece_model(vocab).pieces.size());
    TUPE_CHECK(pieces <= ckpt.config.vocab_size, vocab.string() << ": " << pieces << " pieces, more than the model's vocab_size "
                                                                << ckpt.config.vocab_size);
  } else if (vocab.extension() == ".txt") {
    const int64_t lines = count_lines(vocab);
    TUPE_CHECK(lines == ckpt.config.vocab_size, vocab.string() << ": " << lines << " tokens, the model has vocab_size "
                                                               << ckpt.config.vocab_size);
  }
}

namespace {

/// The lower_case recorded by the first readable training shard of the checkpoint's run
/// (data.train_shards) when it was made with the checkpoint's vocabulary; nullopt otherwise.
std::optional<bool> lower_case_of_shards(const checkpoint::ModelCheckpoint& ckpt) {
  const std::string shards = saved_key(ckpt, "data.train_shards");
  if (shards.empty()) return std::nullopt;
  try {
    const auto files = data_pipeline::list_shard_files(split_comma_list(shards), "train");
    if (files.empty()) return std::nullopt;
    data_pipeline::h5::Lock lock;
    data_pipeline::h5::Id file = data_pipeline::h5::open_file_readonly(files.front());
    const data_pipeline::ShardHeader header = data_pipeline::read_shard_header(files.front(), file.get());
    if (!ckpt.contents.state.vocab_sha256.empty() && header.vocab_sha256 != ckpt.contents.state.vocab_sha256)
      return std::nullopt;
    return header.lower_case;
  } catch (const std::exception&) {
    return std::nullopt;  // moved, deleted, unreadable or NVIDIA shards: the caller asks for --lower-case
  }
}

}  // namespace

namespace {
constexpr Choice<LowerCase> kLowerCaseWords[] = {
    {"auto", LowerCase::kAuto}, {"true", LowerCase::kTrue}, {"false", LowerCase::kFalse}};
}  // namespace

std::string to_string(LowerCase l) { return choice_word(l, kLowerCaseWords); }

LowerCase parse_lower_case(const std::string& option, const std::string& text) {
  return parse_choice(option, text, kLowerCaseWords);
}

bool resolve_lower_case(LowerCase option, const checkpoint::ModelCheckpoint& ckpt) {
  std::string source;
  if (const auto recorded = checkpoint::recorded_tokenizer(ckpt, &source)) {
    TUPE_CHECK(option == LowerCase::kAuto || (option == LowerCase::kTrue) == recorded->lower_case,
               "--lower-case " << to_string(option) << " contradicts the checkpoint's tokenizer.lower_case "
                               << (recorded->lower_case ? "true" : "false") << " (" << source
                               << "); leave --lower-case out");
    return recorded->lower_case;
  }
  if (option != LowerCase::kAuto) return option == LowerCase::kTrue;
  const std::string saved = saved_key(ckpt, "tokenizer.lower_case");
  if (saved == "true" || saved == "false") return saved == "true";
  if (const auto from_shards = lower_case_of_shards(ckpt)) return *from_shards;
  TUPE_FAIL(ckpt.dir.string() << ": the checkpoint does not record whether its WordPiece vocabulary lower-cases text "
                                 "(no tokenizer.lower_case, and no readable training shard of data.train_shards '"
                              << saved_key(ckpt, "data.train_shards") << "'); give --lower-case true|false");
}

}  // namespace tupe::exporting
