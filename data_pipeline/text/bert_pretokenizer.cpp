#include "data_pipeline/text/bert_pretokenizer.h"

#include <array>

#include "data_pipeline/text/bert_chars.h"
#include "data_pipeline/text/utf8.h"

namespace tupe::data_pipeline {

namespace {

using namespace bert_chars;

constexpr std::array<uint8_t, 128> kAscii = [] {
  std::array<uint8_t, 128> t{};
  for (unsigned b = 0; b < 128; ++b) t[b] = ascii_flags(static_cast<unsigned char>(b));
  return t;
}();

/// The scanning state of one bert_basic_split() call.
class Splitter {
 public:
  Splitter(const BertBasicOptions& o, WordSink& sink)
      : lower_(o.lower_case), strip_(o.strip_accents), normalizing_(o.lower_case || o.strip_accents), sink_(sink) {}

  void split(std::string_view text) {
    const auto* bytes = reinterpret_cast<const unsigned char*>(text.data());
    const size_t n = text.size();
    size_t i = 0;
    while (i < n) {
      const unsigned b = bytes[i];
      if (b < 0x80) {
        const uint8_t f = kAscii[b];
        ++i;
        if (f == kRemoved) continue;  // dropped; does not end a run of non-ASCII characters
        flush_run();
        if (f == 0) {
          word_.push_back(static_cast<char>(lower_ && b >= 'A' && b <= 'Z' ? b + 32 : b));
          ++word_chars_;
          // Tight loop over the rest of an ASCII word.
          while (i < n && bytes[i] < 0x80 && kAscii[bytes[i]] == 0) {
            const unsigned c = bytes[i++];
            word_.push_back(static_cast<char>(lower_ && c >= 'A' && c <= 'Z' ? c + 32 : c));
            ++word_chars_;
          }
        } else if (f == kWhitespace) {
          flush_word();
        } else {  // ASCII punctuation: a word of its own
          flush_word();
          word_.push_back(static_cast<char>(b));
          word_chars_ = 1;
          flush_word();
        }
        continue;
      }
      const Utf8Step step = decode_utf8(text, i);
      if (step.length == 0) throw InvalidUtf8(static_cast<int64_t>(i), step.cause);
      i += static_cast<size_t>(step.length);
      const char32_t cp = step.code_point;
      const uint8_t f = flags(cp);
      if (f & kRemoved) continue;
      if (f & kWhitespace) {
        flush_run();
        flush_word();
      } else if (f & kCjk) {  // " c ": isolated before normalisation
        flush_run();
        flush_word();
        run_.push_back(cp);
        run_needs_normalize_ = (f & kNeedsNormalize) != 0;
        flush_run();
        flush_word();
      } else if (!normalizing_) {
        emit(cp, f);
      } else {
        run_.push_back(cp);
        if (f & kNeedsNormalize) run_needs_normalize_ = true;
      }
    }
    flush_run();
    flush_word();
  }

 private:
  /// One normalised character into the current word (or as a separator / lone word).
  void emit(char32_t cp, uint8_t f) {
    if (f & kWhitespace) {
      flush_word();
    } else if (f & kPunctuation) {
      flush_word();
      append_utf8(word_, cp);
      word_chars_ = 1;
      flush_word();
    } else {
      append_utf8(word_, cp);
      ++word_chars_;
    }
  }

  void flush_run() {
    if (run_.empty()) return;
    if (!normalizing_ || !run_needs_normalize_) {
      for (char32_t cp : run_) emit(cp, flags(cp));
    } else {
      normalized_.clear();
      normalize_run(run_, strip_, lower_, normalized_, scratch16_);
      for (char32_t cp : normalized_) emit(cp, flags(cp));
    }
    run_.clear();
    run_needs_normalize_ = false;
  }

  void flush_word() {
    if (word_.empty()) return;
    sink_.word(word_, word_chars_);
    word_.clear();
    word_chars_ = 0;
  }

  const bool lower_, strip_, normalizing_;
  WordSink& sink_;
  std::string word_;          // the current word, normalised UTF-8
  size_t word_chars_ = 0;     // its code points
  std::u32string run_;        // non-ASCII characters awaiting normalisation
  bool run_needs_normalize_ = false;
  std::u32string normalized_;
  std::u16string scratch16_;
};

}  // namespace

void bert_basic_split(std::string_view text, const BertBasicOptions& options, WordSink& sink) {
  Splitter(options, sink).split(text);
}

}  // namespace tupe::data_pipeline
