// UTF-8 decoding and validation for the tokenizers (RFC 3629: no overlong forms, no
// surrogates U+D800..U+DFFF, nothing above U+10FFFF, no truncated sequences).
//
// Errors name the byte offset of the first byte of the offending sequence, counted from the
// start of the text given (or of the file, for validate_utf8_file), so a caller can point a
// user at the exact place: "<file>: invalid UTF-8 at byte N: <cause>".
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/error.h"

namespace tupe::data_pipeline {

/// Invalid UTF-8. what() is "invalid UTF-8 at byte N: <cause>" (no file name: the caller
/// prefixes it); byte_offset() is N, so a caller encoding a file piecewise can add its own
/// base offset and re-throw with the file's absolute offset.
class InvalidUtf8 : public Error {
 public:
  InvalidUtf8(int64_t byte_offset, const std::string& cause);
  int64_t byte_offset() const { return byte_offset_; }
  const std::string& cause() const { return cause_; }

 private:
  int64_t byte_offset_;
  std::string cause_;
};

/// Result of decoding one code point: `length` bytes were consumed (1..4), or 0 on invalid
/// input (then `cause` says why and `code_point` is meaningless).
struct Utf8Step {
  char32_t code_point = 0;
  int length = 0;
  const char* cause = nullptr;
};

/// Decodes the code point starting at s[i] (i < s.size()). Pure; no exceptions.
inline Utf8Step decode_utf8(std::string_view s, size_t i) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data()) + i;
  const size_t left = s.size() - i;
  const unsigned b0 = p[0];
  if (b0 < 0x80) return {b0, 1, nullptr};
  int need;
  char32_t cp;
  char32_t min_cp;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 1, cp = b0 & 0x1F, min_cp = 0x80;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 2, cp = b0 & 0x0F, min_cp = 0x800;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 3, cp = b0 & 0x07, min_cp = 0x10000;
  } else {
    return {0, 0, b0 < 0xC0 ? "unexpected continuation byte" : "byte that never occurs in UTF-8"};
  }
  if (left < static_cast<size_t>(need) + 1) return {0, 0, "sequence truncated by the end of the text"};
  for (int k = 1; k <= need; ++k) {
    const unsigned b = p[k];
    if ((b & 0xC0) != 0x80) return {0, 0, "sequence truncated (missing continuation byte)"};
    cp = (cp << 6) | (b & 0x3F);
  }
  if (cp < min_cp) return {0, 0, "overlong encoding"};
  if (cp >= 0xD800 && cp <= 0xDFFF) return {0, 0, "encoded surrogate code point"};
  if (cp > 0x10FFFF) return {0, 0, "code point above U+10FFFF"};
  return {cp, need + 1, nullptr};
}

/// Byte offset of the first invalid sequence in `s`, or std::string_view::npos when `s` is
/// valid UTF-8. `cause` (optional) receives the reason. Fast path for ASCII runs.
size_t find_invalid_utf8(std::string_view s, const char** cause = nullptr);

/// Throws InvalidUtf8 ("invalid UTF-8 at byte N: <cause>") unless `s` is valid UTF-8.
void check_utf8(std::string_view s);

/// Validates a whole file in bounded memory (1 MiB chunks; sequences may straddle chunks).
/// Throws tupe::Error "<path>: invalid UTF-8 at byte N: <cause>" (N from the file start),
/// or "<path>: cannot open/read: <reason>".
void validate_utf8_file(const std::string& path);

/// Appends the UTF-8 encoding of `cp` (a valid scalar value) to `out`.
inline void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

}  // namespace tupe::data_pipeline
