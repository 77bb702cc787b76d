// UTF-8 validation (byte offsets, against ICU's U8_NEXT as an independent decoder) and
// the vocabulary's SHA-256 (against coreutils sha256sum; common/sha256.h itself is tested
// against the FIPS 180-4 vectors in tests/common).
#include <gtest/gtest.h>
#include <unicode/utf8.h>

#include <cstdio>
#include <random>

#include "common/sha256.h"
#include "data_pipeline/text/utf8.h"
#include "data_pipeline/text/wordpiece.h"
#include "text_test_util.h"

namespace tupe::data_pipeline {
namespace {

using text_test::ScratchDir;

TEST(TextUtf8, DecodesValidText) {
  const std::string s = "a\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80";  // a é € 😀
  const char32_t want[] = {U'a', 0xE9, 0x20AC, 0x1F600};
  size_t i = 0;
  for (char32_t w : want) {
    const Utf8Step step = decode_utf8(s, i);
    ASSERT_GT(step.length, 0);
    EXPECT_EQ(step.code_point, w);
    i += static_cast<size_t>(step.length);
  }
  EXPECT_EQ(i, s.size());
  EXPECT_EQ(find_invalid_utf8(s), std::string_view::npos);
}

TEST(TextUtf8, ReportsTheByteOffsetOfEachKindOfError) {
  struct Case {
    std::string bytes;
    size_t offset;
    const char* cause;
  };
  const Case cases[] = {
      {"abc\xFF", 3, "never occurs"},
      {"0123456789abcdef\x80", 16, "continuation"},
      {"ab\xC3", 2, "truncated"},
      {"a\xC3(", 1, "truncated"},
      {"\xC0\xAF", 0, "never occurs"},             // overlong '/', lead byte C0
      {"xy\xE0\x80\xAF", 2, "overlong"},           // overlong '/', 3 bytes
      {"\xF0\x8F\xBF\xBF", 0, "overlong"},         // overlong U+FFFF
      {"ok \xED\xA0\x80", 3, "surrogate"},         // U+D800
      {"\xF4\x90\x80\x80", 0, "above U+10FFFF"},   // U+110000
      {"\xE2\x82\xAC\xE2\x82", 3, "truncated"},    // € then a cut €
  };
  for (const auto& c : cases) {
    const char* cause = nullptr;
    EXPECT_EQ(find_invalid_utf8(c.bytes, &cause), c.offset) << c.bytes;
    ASSERT_NE(cause, nullptr);
    EXPECT_NE(std::string(cause).find(c.cause), std::string::npos) << cause;
    try {
      check_utf8(c.bytes);
      ADD_FAILURE() << "no error for " << c.bytes;
    } catch (const InvalidUtf8& e) {
      EXPECT_EQ(e.byte_offset(), static_cast<int64_t>(c.offset));
      EXPECT_EQ(std::string(e.what()).rfind("invalid UTF-8 at byte " + std::to_string(c.offset) + ": ", 0), 0u)
          << e.what();
    }
  }
}

// Random byte strings (biased towards UTF-8-like bytes): our first-error offset equals the
// one found by ICU's U8_NEXT (an independent, strict decoder).
TEST(TextUtf8, AgreesWithIcuOnRandomBytes) {
  std::mt19937 rng(7);
  const unsigned char alphabet[] = {'a', ' ', 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xC1, 0xC2, 0xDF, 0xE0,
                                    0xE1, 0xED, 0xEF, 0xF0, 0xF1, 0xF4, 0xF5, 0xFF};
  int invalid = 0;
  for (int trial = 0; trial < 20000; ++trial) {
    std::string s(rng() % 12, '\0');
    for (char& ch : s) ch = static_cast<char>(alphabet[rng() % sizeof(alphabet)]);
    size_t icu_bad = std::string_view::npos;
    const auto* p = reinterpret_cast<const uint8_t*>(s.data());
    for (int32_t i = 0, n = static_cast<int32_t>(s.size()); i < n;) {
      const int32_t start = i;
      UChar32 c;
      U8_NEXT(p, i, n, c);
      if (c < 0) {
        icu_bad = static_cast<size_t>(start);
        break;
      }
    }
    if (icu_bad != std::string_view::npos) ++invalid;
    ASSERT_EQ(find_invalid_utf8(s), icu_bad) << "trial " << trial;
  }
  EXPECT_GT(invalid, 1000);
}

TEST(TextUtf8, ValidatesFilesAcrossChunkBoundaries) {
  ScratchDir dir("utf8");
  const size_t chunk = size_t{1} << 20;  // validate_utf8_file reads 1 MiB at a time
  // A 4-byte character straddling the first chunk boundary is valid.
  std::string ok(chunk - 2, 'a');
  ok += "\xF0\x9F\x98\x80 tail";
  EXPECT_NO_THROW(validate_utf8_file(dir.write("ok.txt", ok)));
  // An invalid byte after the boundary is reported with its offset from the file start.
  std::string bad = ok + std::string(100, 'b') + "\xC3\x28";
  const std::string bad_path = dir.write("bad.txt", bad);
  try {
    validate_utf8_file(bad_path);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), bad_path + ": invalid UTF-8 at byte " + std::to_string(ok.size() + 100) +
                                         ": sequence truncated (missing continuation byte)");
  }
  // A sequence cut by the end of the file.
  const std::string cut_path = dir.write("cut.txt", std::string(chunk + 5, 'c') + "\xE2\x82");
  EXPECT_THROW(
      {
        try {
          validate_utf8_file(cut_path);
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find("at byte " + std::to_string(chunk + 5) + ":"), std::string::npos)
              << e.what();
          throw;
        }
      },
      Error);
  try {
    validate_utf8_file(dir.file("missing.txt"));
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), dir.file("missing.txt") + ": cannot open: No such file or directory");
  }
}

TEST(TextUtf8, EncodeReportsOffsetsInTheWholeText) {
  WordPieceOptions o;
  o.vocab_path = text_test::uncased_vocab();
  const WordPieceTokenizer t(o);
  // After a literal special token (the text is cut into segments there) the offset still
  // counts from the start of the text.
  for (const auto& [text, offset] : std::vector<std::pair<std::string, int64_t>>{
           {"hello \xFF", 6}, {"[CLS] ok \xFF", 9}, {"[SEP][MASK] caf\xC3\xA9 \xE2\x82", 18}, {"\xC3\xA9\xC3", 2}}) {
    try {
      t.encode(text);
      ADD_FAILURE() << "no error for " << text;
    } catch (const InvalidUtf8& e) {
      EXPECT_EQ(e.byte_offset(), offset) << e.what();
    }
  }
}

std::string sha256sum(const std::string& path) {
  std::unique_ptr<FILE, int (*)(FILE*)> p(popen(("sha256sum '" + path + "'").c_str(), "r"), &pclose);
  if (!p) throw std::runtime_error("cannot run sha256sum");
  char buf[65] = {};
  if (std::fread(buf, 1, 64, p.get()) != 64) throw std::runtime_error("sha256sum gave no digest");
  return std::string(buf, 64);
}

TEST(TextSha256, VocabHashEqualsCoreutils) {
  for (const std::string& vocab : {text_test::uncased_vocab(), text_test::cased_vocab()}) {
    WordPieceOptions o;
    o.vocab_path = vocab;
    EXPECT_EQ(WordPieceTokenizer(o).vocab_sha256(), sha256sum(vocab)) << vocab;
  }
}

}  // namespace
}  // namespace tupe::data_pipeline
