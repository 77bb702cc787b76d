#include "data_pipeline/text/wordpiece.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "common/error.h"
#include "data_pipeline/text/vocab_file.h"
#include "data_pipeline/text/bert_pretokenizer.h"
#include "common/sha256.h"
#include "data_pipeline/text/utf8.h"

namespace tupe::data_pipeline {

namespace {

constexpr std::string_view kContinuationPrefix = "##";

/// Feeds the words of the basic tokenizer into WordPiece.
class IdSink final : public WordSink {
 public:
  IdSink(const WordPieceTokenizer& tokenizer, std::vector<int32_t>& ids) : tokenizer_(tokenizer), ids_(ids) {}
  void word(std::string_view word, size_t num_chars) override { tokenizer_.encode_word(word, num_chars, ids_); }

 private:
  const WordPieceTokenizer& tokenizer_;
  std::vector<int32_t>& ids_;
};

bool is_utf8_continuation(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

}  // namespace

std::vector<std::string> read_wordpiece_vocab(const std::string& path, std::string* sha256) {
  const std::string bytes = read_vocab_bytes(path);
  if (sha256) *sha256 = sha256_hex(bytes);
  TUPE_CHECK(!bytes.empty(), path << ": empty vocabulary (no tokens)");
  std::vector<std::string> tokens;
  VocabIndex seen;
  size_t line_start = 0;
  int64_t line_no = 0;
  while (line_start < bytes.size()) {
    ++line_no;
    size_t line_end = bytes.find('\n', line_start);
    if (line_end == std::string::npos) line_end = bytes.size();
    std::string_view token(bytes.data() + line_start, line_end - line_start);
    if (!token.empty() && token.back() == '\r') token.remove_suffix(1);
    const char* cause = nullptr;
    const size_t bad = find_invalid_utf8(token, &cause);
    TUPE_CHECK(bad == std::string_view::npos,
               path << ": line " << line_no << ": invalid UTF-8 at byte " << (line_start + bad) << ": " << cause);
    TUPE_CHECK(!token.empty(), path << ": line " << line_no << ": empty token");
    TUPE_CHECK(std::none_of(token.begin(), token.end(),
                            [](char c) { return static_cast<unsigned char>(c) <= 0x20 || c == 0x7F; }),
               path << ": line " << line_no << ": token contains a space or control character");
    const auto id = static_cast<int32_t>(tokens.size());
    if (!seen.insert(token, id)) {
      TUPE_FAIL(path << ": line " << line_no << ": duplicate token '" << token << "' (first on line "
                     << (seen.find(token) + 1) << ")");
    }
    tokens.emplace_back(token);
    TUPE_CHECK(tokens.size() < (size_t{1} << 31), path << ": more than 2^31 tokens");
    line_start = line_end + 1;
  }
  return tokens;
}

WordPieceTokenizer::WordPieceTokenizer(const WordPieceOptions& options) : options_(options) {
  TUPE_CHECK(options.max_word_chars > 0, options.vocab_path << ": max_word_chars must be positive, got "
                                                            << options.max_word_chars);
  tokens_ = read_wordpiece_vocab(options.vocab_path, &sha256_);
  for (size_t id = 0; id < tokens_.size(); ++id) {
    const std::string& t = tokens_[id];
    index_.insert(t, static_cast<int32_t>(id));
    if (t.size() > kContinuationPrefix.size() && t.compare(0, kContinuationPrefix.size(), kContinuationPrefix) == 0)
      continuation_index_.insert(std::string_view(t).substr(kContinuationPrefix.size()), static_cast<int32_t>(id));
  }
  auto require = [&](const char* name) {
    const int32_t id = index_.find(name);
    TUPE_CHECK(id >= 0, options.vocab_path << ": special token " << name << " missing");
    return id;
  };
  special_.pad = require("[PAD]");
  special_.unk = require("[UNK]");
  special_.cls = require("[CLS]");
  special_.sep = require("[SEP]");
  special_.mask = require("[MASK]");
}

const std::string& WordPieceTokenizer::id_to_token(int32_t id) const {
  TUPE_CHECK(id >= 0 && static_cast<size_t>(id) < tokens_.size(),
             "wordpiece: id " << id << " outside [0, " << tokens_.size() << ")");
  return tokens_[static_cast<size_t>(id)];
}

void WordPieceTokenizer::encode_word(std::string_view word, size_t num_chars, std::vector<int32_t>& ids) const {
  if (num_chars > static_cast<size_t>(options_.max_word_chars)) {
    ids.push_back(special_.unk);
    return;
  }
  if (const int32_t whole = index_.find(word); whole >= 0) {
    ids.push_back(whole);
    return;
  }
  const size_t mark = ids.size();
  const size_t n = word.size();
  size_t start = 0;
  while (start < n) {
    const VocabIndex& index = start == 0 ? index_ : continuation_index_;
    size_t end = std::min(n, start + index.max_length_bytes());
    int32_t found = -1;
    for (; end > start; --end) {
      if (end < n && is_utf8_continuation(word[end])) continue;  // not a character boundary
      found = index.find(word.substr(start, end - start));
      if (found >= 0) break;
    }
    if (found < 0) {  // some position has no piece: the whole word is unknown
      ids.resize(mark);
      ids.push_back(special_.unk);
      return;
    }
    ids.push_back(found);
    start = end;
  }
}

void WordPieceTokenizer::encode_segment(std::string_view text, std::vector<int32_t>& ids) const {
  IdSink sink(*this, ids);
  bert_basic_split(text, BertBasicOptions{options_.lower_case, options_.strip_accents}, sink);
}

void WordPieceTokenizer::encode_into(std::string_view text, std::vector<int32_t>& ids) const {
  // Literal special tokens, matched on the raw text (HF added tokens: normalized = false).
  static constexpr std::string_view kSpecialNames[] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
  const int32_t special_ids[] = {special_.pad, special_.unk, special_.cls, special_.sep, special_.mask};
  size_t segment_start = 0;
  size_t search = 0;
  while (true) {
    const size_t bracket = text.find('[', search);
    size_t match = 0;
    int32_t match_id = -1;
    if (bracket != std::string_view::npos) {
      for (size_t k = 0; k < std::size(kSpecialNames); ++k) {
        if (text.compare(bracket, kSpecialNames[k].size(), kSpecialNames[k]) == 0) {
          match = kSpecialNames[k].size();
          match_id = special_ids[k];
          break;
        }
      }
      if (match_id < 0) {
        search = bracket + 1;
        continue;
      }
    }
    const size_t segment_end = bracket == std::string_view::npos ? text.size() : bracket;
    try {
      encode_segment(text.substr(segment_start, segment_end - segment_start), ids);
    } catch (const InvalidUtf8& e) {
      throw InvalidUtf8(e.byte_offset() + static_cast<int64_t>(segment_start), e.cause());
    }
    if (bracket == std::string_view::npos) return;
    ids.push_back(match_id);
    segment_start = search = bracket + match;
  }
}

std::vector<int32_t> WordPieceTokenizer::encode(std::string_view text) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 4 + 4);
  encode_into(text, ids);
  return ids;
}

std::string WordPieceTokenizer::decode(const std::vector<int32_t>& ids) const {
  std::string out;
  for (const int32_t id : ids) {
    const std::string& t = id_to_token(id);
    const bool glued = t.size() > kContinuationPrefix.size() && t.compare(0, 2, kContinuationPrefix) == 0;
    if (glued) {
      out.append(t, kContinuationPrefix.size());
    } else {
      if (!out.empty()) out.push_back(' ');
      out.append(t);
    }
  }
  return out;
}

}  // namespace tupe::data_pipeline
