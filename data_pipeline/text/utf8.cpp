#include "data_pipeline/text/utf8.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <sstream>
#include <vector>

namespace tupe::data_pipeline {

namespace {

std::string invalid_message(int64_t byte_offset, const std::string& cause) {
  std::ostringstream os;
  os << "invalid UTF-8 at byte " << byte_offset << ": " << cause;
  return os.str();
}

/// Bytes from `i` on that are ASCII, 8 at a time while possible.
size_t skip_ascii(std::string_view s, size_t i) {
  const size_t n = s.size();
  while (i + 8 <= n) {
    uint64_t word;
    std::memcpy(&word, s.data() + i, 8);
    if (word & 0x8080808080808080ULL) break;
    i += 8;
  }
  while (i < n && static_cast<unsigned char>(s[i]) < 0x80) ++i;
  return i;
}

}  // namespace

InvalidUtf8::InvalidUtf8(int64_t byte_offset, const std::string& cause)
    : Error(invalid_message(byte_offset, cause)), byte_offset_(byte_offset), cause_(cause) {}

size_t find_invalid_utf8(std::string_view s, const char** cause) {
  size_t i = 0;
  while (true) {
    i = skip_ascii(s, i);
    if (i >= s.size()) return std::string_view::npos;
    const Utf8Step step = decode_utf8(s, i);
    if (step.length == 0) {
      if (cause) *cause = step.cause;
      return i;
    }
    i += static_cast<size_t>(step.length);
  }
}

void check_utf8(std::string_view s) {
  const char* cause = nullptr;
  const size_t bad = find_invalid_utf8(s, &cause);
  if (bad != std::string_view::npos) throw InvalidUtf8(static_cast<int64_t>(bad), cause);
}

void validate_utf8_file(const std::string& path) {
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  TUPE_CHECK(f != nullptr, path << ": cannot open: " << std::strerror(errno));
  constexpr size_t kChunkBytes = size_t{1} << 20;
  std::vector<char> buf(kChunkBytes + 4);
  size_t carry = 0;           // bytes of an unfinished sequence kept from the previous chunk
  int64_t carry_offset = 0;   // file offset of buf[0]
  while (true) {
    const size_t got = std::fread(buf.data() + carry, 1, kChunkBytes, f.get());
    TUPE_CHECK(!std::ferror(f.get()), path << ": cannot read: " << std::strerror(errno));
    const bool eof = got < kChunkBytes;
    const std::string_view chunk(buf.data(), carry + got);
    size_t i = 0;
    while (true) {
      i = skip_ascii(chunk, i);
      if (i >= chunk.size()) break;
      // A sequence cut by the chunk end is finished with the next chunk (unless at EOF).
      if (!eof && chunk.size() - i < 4) {
        const auto b0 = static_cast<unsigned char>(chunk[i]);
        const size_t need = b0 >= 0xF0 ? 4 : b0 >= 0xE0 ? 3 : b0 >= 0xC0 ? 2 : 1;
        if (chunk.size() - i < need) break;
      }
      const Utf8Step step = decode_utf8(chunk, i);
      TUPE_CHECK(step.length > 0, path << ": " << invalid_message(carry_offset + static_cast<int64_t>(i), step.cause));
      i += static_cast<size_t>(step.length);
    }
    if (eof) return;
    carry = chunk.size() - i;
    std::memmove(buf.data(), buf.data() + i, carry);
    carry_offset += static_cast<int64_t>(i);
  }
}

}  // namespace tupe::data_pipeline
