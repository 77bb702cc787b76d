#include "tools/export/hf_tokenizer.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <tuple>

#include "checkpoint/durable_io.h"
#include "common/error.h"

namespace tupe::exporting {
namespace fs = std::filesystem;

data_pipeline::TokenizerKind tokenizer_kind_of(const fs::path& vocab) {
  return vocab.extension() == ".model" ? data_pipeline::TokenizerKind::kSentencePiece
                                       : data_pipeline::TokenizerKind::kWordPiece;
}

namespace {

// ---- A protobuf wire-format reader, enough for sentencepiece_model.proto ---------------------
// Field numbers read (sentencepiece_model.proto):
//   ModelProto:     1 pieces (repeated SentencePiece), 2 trainer_spec, 3 normalizer_spec
//   SentencePiece:  1 piece (string), 2 score (float), 3 type (enum)
//   TrainerSpec:    3 model_type (enum), 35 byte_fallback (bool), 40 unk_id (int32)
//   NormalizerSpec: 2 precompiled_charsmap (bytes), 3 add_dummy_prefix, 4 remove_extra_whitespaces,
//                   5 escape_whitespaces (bools, default true)

class Wire {
 public:
  Wire(const std::string& bytes, const std::string& where) : p_(bytes.data()), end_(p_ + bytes.size()), where_(where) {}
  bool done() const { return p_ >= end_; }

  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      TUPE_CHECK(p_ < end_, where_ << ": not a SentencePiece model (truncated varint)");
      const auto b = static_cast<uint8_t>(*p_++);
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
    }
    TUPE_FAIL(where_ << ": not a SentencePiece model (overlong varint)");
  }
  /// Next field: its number and wire type.
  std::pair<uint64_t, int> key() {
    const uint64_t k = varint();
    return {k >> 3, static_cast<int>(k & 7)};
  }
  std::string bytes() {
    const uint64_t n = varint();
    TUPE_CHECK(n <= static_cast<uint64_t>(end_ - p_), where_ << ": not a SentencePiece model (field past the end)");
    std::string out(p_, p_ + n);
    p_ += n;
    return out;
  }
  float fixed32_float() {
    TUPE_CHECK(end_ - p_ >= 4, where_ << ": not a SentencePiece model (truncated float)");
    float f;
    std::memcpy(&f, p_, 4);  // little-endian on every platform tupe builds for
    p_ += 4;
    return f;
  }
  void skip(int wire_type) {
    switch (wire_type) {
      case 0: varint(); return;
      case 1: advance(8); return;
      case 2: bytes(); return;
      case 5: advance(4); return;
      default: TUPE_FAIL(where_ << ": not a SentencePiece model (wire type " << wire_type << ")");
    }
  }

 private:
  void advance(int64_t n) {
    TUPE_CHECK(end_ - p_ >= n, where_ << ": not a SentencePiece model (field past the end)");
    p_ += n;
  }
  const char* p_;
  const char* end_;
  std::string where_;
};

SentencePieceModel::Piece parse_piece(const std::string& bytes, const std::string& where) {
  SentencePieceModel::Piece piece;
  Wire w(bytes, where);
  while (!w.done()) {
    const auto [field, type] = w.key();
    if (field == 1 && type == 2) piece.text = w.bytes();
    else if (field == 2 && type == 5) piece.score = w.fixed32_float();
    else if (field == 3 && type == 0) piece.type = static_cast<int>(w.varint());
    else w.skip(type);
  }
  return piece;
}

void parse_trainer_spec(const std::string& bytes, SentencePieceModel& m, const std::string& where) {
  Wire w(bytes, where);
  while (!w.done()) {
    const auto [field, type] = w.key();
    if (field == 3 && type == 0) m.model_type = static_cast<int>(w.varint());
    else if (field == 35 && type == 0) m.byte_fallback = w.varint() != 0;
    else if (field == 40 && type == 0) m.unk_id = static_cast<int64_t>(w.varint());
    else w.skip(type);
  }
}

void parse_normalizer_spec(const std::string& bytes, SentencePieceModel& m, const std::string& where) {
  Wire w(bytes, where);
  while (!w.done()) {
    const auto [field, type] = w.key();
    if (field == 2 && type == 2) m.precompiled_charsmap = w.bytes();
    else if (field == 3 && type == 0) m.add_dummy_prefix = w.varint() != 0;
    else if (field == 4 && type == 0) m.remove_extra_whitespaces = w.varint() != 0;
    else if (field == 5 && type == 0) m.escape_whitespaces = w.varint() != 0;
    else w.skip(type);
  }
}

std::string base64(const std::string& in) {
  static const char* table = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  for (size_t i = 0; i < in.size(); i += 3) {
    uint32_t v = static_cast<uint8_t>(in[i]) << 16;
    if (i + 1 < in.size()) v |= static_cast<uint8_t>(in[i + 1]) << 8;
    if (i + 2 < in.size()) v |= static_cast<uint8_t>(in[i + 2]);
    out += table[(v >> 18) & 63];
    out += table[(v >> 12) & 63];
    out += i + 1 < in.size() ? table[(v >> 6) & 63] : '=';
    out += i + 2 < in.size() ? table[v & 63] : '=';
  }
  return out;
}

/// Byte offsets where UTF-8 characters of `s` start (after the first).
std::vector<size_t> char_boundaries(const std::string& s) {
  std::vector<size_t> out;
  for (size_t i = 1; i < s.size(); ++i)
    if ((static_cast<uint8_t>(s[i]) & 0xC0) != 0x80) out.push_back(i);
  return out;
}


const std::vector<std::pair<std::string, std::string>>& special_token_keys() {
  static const std::vector<std::pair<std::string, std::string>> keys = {
      {"pad_token", "[PAD]"}, {"unk_token", "[UNK]"}, {"cls_token", "[CLS]"}, {"sep_token", "[SEP]"},
      {"mask_token", "[MASK]"}};
  return keys;
}

}  // namespace

SentencePieceModel read_sentencepiece_model(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  TUPE_CHECK(in, path.string() << ": cannot read the SentencePiece model");
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  SentencePieceModel m;
  Wire w(bytes, path.string());
  while (!w.done()) {
    const auto [field, type] = w.key();
    if (field == 1 && type == 2) m.pieces.push_back(parse_piece(w.bytes(), path.string()));
    else if (field == 2 && type == 2) parse_trainer_spec(w.bytes(), m, path.string());
    else if (field == 3 && type == 2) parse_normalizer_spec(w.bytes(), m, path.string());
    else w.skip(type);
  }
  TUPE_CHECK(!m.pieces.empty(), path.string() << ": not a SentencePiece model (no pieces)");
  TUPE_CHECK(m.unk_id >= 0 && m.unk_id < static_cast<int64_t>(m.pieces.size()),
             path.string() << ": unk_id " << m.unk_id << " is not a piece id");
  return m;
}

nlohmann::json sentencepiece_tokenizer_json(const SentencePieceModel& m, const std::string& where) {
  using nlohmann::json;
  TUPE_CHECK(m.model_type == 1 || m.model_type == 2,
             where << ": SentencePiece model type " << m.model_type << " has no tokenizer.json (unigram or BPE only)");
  TUPE_CHECK(m.escape_whitespaces, where << ": SentencePiece model without escape_whitespaces has no tokenizer.json");
  std::map<std::string, int64_t> id_of;
  for (size_t i = 0; i < m.pieces.size(); ++i) id_of.emplace(m.pieces[i].text, static_cast<int64_t>(i));
  std::map<std::string, int64_t> special;
  for (const auto& [key, token] : special_token_keys()) {
    const auto it = id_of.find(token);
    TUPE_CHECK(it != id_of.end(), where << ": special token " << token << " is not a piece of the model");
    special[token] = it->second;
  }

  json added = json::array();
  for (const auto& [token, id] : special)
    added.push_back({{"id", id}, {"content", token}, {"single_word", false}, {"lstrip", false}, {"rstrip", false},
                     {"normalized", false}, {"special", true}});
  std::sort(added.begin(), added.end(), [](const json& a, const json& b) { return a["id"] < b["id"]; });

  json normalizers = json::array();
  if (!m.precompiled_charsmap.empty())
    normalizers.push_back({{"type", "Precompiled"}, {"precompiled_charsmap", base64(m.precompiled_charsmap)}});
  if (m.remove_extra_whitespaces) {
    normalizers.push_back({{"type", "Strip"}, {"strip_left", true}, {"strip_right", true}});
    normalizers.push_back({{"type", "Replace"}, {"pattern", {{"Regex", " {2,}"}}}, {"content", " "}});
  }
  const json metaspace = {{"type", "Metaspace"}, {"replacement", "\u2581"},
                          {"prepend_scheme", m.add_dummy_prefix ? "always" : "never"}, {"split", true}};

  auto token = [](const char* kind, const std::string& id, int type_id) {
    return json{{kind, {{"id", id}, {"type_id", type_id}}}};
  };
  json post = {{"type", "TemplateProcessing"},
               {"single", {token("SpecialToken", "[CLS]", 0), token("Sequence", "A", 0), token("SpecialToken", "[SEP]", 0)}},
               {"pair", {token("SpecialToken", "[CLS]", 0), token("Sequence", "A", 0), token("SpecialToken", "[SEP]", 0),
                         token("Sequence", "B", 1), token("SpecialToken", "[SEP]", 1)}},
               {"special_tokens", json::object()}};
  for (const char* t : {"[CLS]", "[SEP]"})
    post["special_tokens"][t] = {{"id", t}, {"ids", {special[t]}}, {"tokens", {t}}};

  json model;
  if (m.model_type == 1) {
    json vocab = json::array();
    for (const auto& p : m.pieces) vocab.push_back({p.text, p.score});
    model = {{"type", "Unigram"}, {"unk_id", m.unk_id}, {"vocab", vocab}, {"byte_fallback", m.byte_fallback}};
  } else {
    // BPE: every split of a piece into two pieces is a merge, ranked by the merged piece's
    // score (higher first: SentencePiece BPE scores are minus the merge order), then ids.
    json vocab = json::object();
    for (size_t i = 0; i < m.pieces.size(); ++i) vocab[m.pieces[i].text] = static_cast<int64_t>(i);
    struct Merge { float score; int64_t id, left, right; std::string a, b; };
    std::vector<Merge> merges;
    for (size_t i = 0; i < m.pieces.size(); ++i) {
      const auto& p = m.pieces[i];
      if (p.type != 1 && p.type != 4) continue;  // normal and user-defined pieces only
      for (size_t cut : char_boundaries(p.text)) {
        const auto l = id_of.find(p.text.substr(0, cut)), r = id_of.find(p.text.substr(cut));
        if (l != id_of.end() && r != id_of.end())
          merges.push_back({p.score, static_cast<int64_t>(i), l->second, r->second, l->first, r->first});
      }
    }
    std::stable_sort(merges.begin(), merges.end(), [](const Merge& x, const Merge& y) {
      if (x.score != y.score) return x.score > y.score;
      return std::tie(x.id, x.left, x.right) < std::tie(y.id, y.left, y.right);
    });
    json merge_list = json::array();
    for (const auto& mg : merges) merge_list.push_back({mg.a, mg.b});
    model = {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", m.pieces[m.unk_id].text},
             {"continuing_subword_prefix", nullptr}, {"end_of_word_suffix", nullptr}, {"fuse_unk", true},
             {"byte_fallback", m.byte_fallback}, {"ignore_merges", false}, {"vocab", vocab}, {"merges", merge_list}};
  }
  return {{"version", "1.0"},
          {"truncation", nullptr},
          {"padding", nullptr},
          {"added_tokens", added},
          {"normalizer", {{"type", "Sequence"}, {"normalizers", normalizers}}},
          {"pre_tokenizer", metaspace},
          {"post_processor", post},
          {"decoder", metaspace},
          {"model", model}};
}

std::vector<std::string> write_hf_tokenizer(const fs::path& dir, const fs::path& vocab, bool lower_case,
                                            int64_t model_max_length, bool token_type_ids) {
  nlohmann::json config = {{"model_max_length", model_max_length}, {"clean_up_tokenization_spaces", false}};
  if (!token_type_ids) config["model_input_names"] = {"input_ids", "attention_mask"};
  for (const auto& [key, token] : special_token_keys()) config[key] = token;
  if (tokenizer_kind_of(vocab) == data_pipeline::TokenizerKind::kWordPiece) {
    fs::copy_file(vocab, dir / "vocab.txt");
    config["tokenizer_class"] = "BertTokenizer";
    config["do_lower_case"] = lower_case;
    config["strip_accents"] = nullptr;  // BERT: follows do_lower_case, as tupe's WordPiece
    config["tokenize_chinese_chars"] = true;
    checkpoint::write_file_atomic(dir / "tokenizer_config.json", config.dump(2) + "\n");
    return {"vocab.txt", "tokenizer_config.json"};
  }
  const SentencePieceModel model = read_sentencepiece_model(vocab);
  checkpoint::write_file_atomic(dir / "tokenizer.json",
                             sentencepiece_tokenizer_json(model, vocab.string()).dump() + "\n");
  fs::copy_file(vocab, dir / "spm.model");
  config["tokenizer_class"] = "PreTrainedTokenizerFast";
  checkpoint::write_file_atomic(dir / "tokenizer_config.json", config.dump(2) + "\n");
  return {"tokenizer.json", "spm.model", "tokenizer_config.json"};
}

}  // namespace tupe::exporting
