#include "data_pipeline/text/bert_chars.h"

#include <unicode/uchar.h>
#include <unicode/unorm2.h>
#include <unicode/ustring.h>

#include <array>
#include <memory>

#include "common/error.h"

namespace tupe::data_pipeline::bert_chars {

namespace {

// HF's Unicode data come from three places, of three Unicode versions; ICU 72 has 15.0.
// What differs is listed here, found by comparing every code point with HF (tests/text,
// WordPieceParity.CharacterClassesOfEveryCodePoint).

/// 1. Categories: unicode_categories 0.1.1 = Unicode 8.0. Characters assigned later count as
/// unassigned (u_charAge), and these changed category since 8.0 and keep their 8.0 one.
struct CategoryOverride {
  char32_t cp;
  UCharCategory category_in_8_0;
};
constexpr CategoryOverride kOverrides[] = {
    {0x166D, U_OTHER_PUNCTUATION},        // CANADIAN SYLLABICS CHI SIGN: So since 12.0
    {0x111C9, U_OTHER_PUNCTUATION},       // SHARADA SANDHI MARK: Mn since 11.0
    {0x1734, U_NON_SPACING_MARK},         // HANUNOO SIGN PAMUDPOD: Mc since 14.0
    {0x1885, U_OTHER_LETTER},             // MONGOLIAN LETTER ALI GALI BALUDA: Mn since 9.0
    {0x1886, U_OTHER_LETTER},             // MONGOLIAN LETTER ALI GALI THREE BALUDA: Mn since 9.0
    {0xA9BD, U_COMBINING_SPACING_MARK},   // JAVANESE CONSONANT SIGN KERET: Mn since 12.0
};

/// 2. NFD: the unicode-normalization-alignments crate predates Unicode 13.0; the one character
/// of ICU's Unicode that gained a canonical decomposition since stays whole.
constexpr char32_t kNoDecomposition[] = {
    0x11938,  // DIVES AKURU VOWEL SIGN O (13.0) = 11935 11930
};

/// 3. Lower-casing: Rust's char::to_lowercase knows Unicode 17.0; the mappings of capitals
/// ICU 72 does not know yet (all single characters).
struct LowerRange {
  char32_t first, last;  ///< capitals first..last map to first + delta ... last + delta
  int32_t delta;
};
constexpr LowerRange kNewerLowerCase[] = {
    {0x1C89, 0x1C89, 1},                      // CYRILLIC CAPITAL LETTER TJE (16.0)
    {0xA7CB, 0xA7CB, 0x0264 - 0xA7CB},        // LATIN CAPITAL LETTER RAMS HORN (16.0)
    {0xA7CC, 0xA7CC, 1}, {0xA7CE, 0xA7CE, 1}, // (16.0, 17.0)
    {0xA7D2, 0xA7D2, 1}, {0xA7D4, 0xA7D4, 1}, // (17.0)
    {0xA7DA, 0xA7DA, 1},                      // LATIN CAPITAL LETTER LAMBDA (16.0)
    {0xA7DC, 0xA7DC, 0x019B - 0xA7DC},        // LATIN CAPITAL LETTER LAMBDA WITH STROKE (16.0)
    {0x10D50, 0x10D65, 0x20},                 // GARAY CAPITAL LETTERS (16.0)
    {0x16EA0, 0x16EB8, 0x1B},                 // BERIA ERFE CAPITAL LETTERS (17.0)
};

bool keeps_whole(char32_t cp) {
  for (char32_t c : kNoDecomposition)
    if (c == cp) return true;
  return false;
}

/// The newer lower-case mapping of `cp`, or 0 when it has none.
char32_t newer_lower(char32_t cp) {
  for (const auto& r : kNewerLowerCase)
    if (cp >= r.first && cp <= r.last) return static_cast<char32_t>(static_cast<int32_t>(cp) + r.delta);
  return 0;
}

/// General category as HF's unicode_categories 0.1.1 (Unicode 8.0) sees it.
UCharCategory category_in_unicode_8(char32_t cp) {
  const auto c = static_cast<UChar32>(cp);
  for (const auto& o : kOverrides)
    if (o.cp == cp) return o.category_in_8_0;
  UVersionInfo age;
  u_charAge(c, age);
  if (age[0] > 8 || (age[0] == 8 && (age[1] > 0 || age[2] > 0))) return U_UNASSIGNED;
  return static_cast<UCharCategory>(u_charType(c));
}

bool is_cjk(char32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
         (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

const UNormalizer2* nfd_instance() {
  UErrorCode err = U_ZERO_ERROR;
  const UNormalizer2* nfd = unorm2_getNFDInstance(&err);
  TUPE_CHECK(U_SUCCESS(err) && nfd != nullptr, "ICU: unorm2_getNFDInstance failed: " << u_errorName(err));
  return nfd;
}

/// Appends the full (SpecialCasing) lower-case mapping of one character, as Rust's
/// char::to_lowercase: no context (a lone capital sigma maps to small sigma).
void append_lower(char32_t cp, std::u32string& out) {
  const auto c = static_cast<UChar32>(cp);
  if (const char32_t lower = newer_lower(cp)) {
    out.push_back(lower);
    return;
  }
  if (!u_hasBinaryProperty(c, UCHAR_CHANGES_WHEN_LOWERCASED)) {
    out.push_back(cp);
    return;
  }
  UChar src[2];
  int32_t src_len = 0;
  U16_APPEND_UNSAFE(src, src_len, c);
  UChar dst[8];
  UErrorCode err = U_ZERO_ERROR;
  const int32_t n = u_strToLower(dst, 8, src, src_len, "", &err);
  TUPE_CHECK(U_SUCCESS(err), "ICU: u_strToLower failed on U+" << std::hex << static_cast<uint32_t>(cp) << ": "
                                                              << u_errorName(err));
  for (int32_t i = 0; i < n;) {
    UChar32 o;
    U16_NEXT(dst, i, n, o);
    out.push_back(static_cast<char32_t>(o));
  }
}

/// `cp`, lower-cased when asked.
void append_cased(char32_t cp, bool lower_case, std::u32string& out) {
  if (lower_case)
    append_lower(cp, out);
  else
    out.push_back(cp);
}

/// NFD of run[begin, end), minus kAccent characters, each lower-cased when asked.
void nfd_strip_lower(const std::u32string& run, size_t begin, size_t end, bool lower_case, std::u32string& out,
                     std::u16string& scratch) {
  if (begin == end) return;
  scratch.clear();
  for (size_t k = begin; k < end; ++k) {
    UChar u[2];
    int32_t len = 0;
    U16_APPEND_UNSAFE(u, len, static_cast<UChar32>(run[k]));
    scratch.append(reinterpret_cast<const char16_t*>(u), static_cast<size_t>(len));
  }
  static const UNormalizer2* const kNfd = nfd_instance();
  const auto* src = reinterpret_cast<const UChar*>(scratch.data());
  const auto src_len = static_cast<int32_t>(scratch.size());
  // Canonical decompositions expand by at most a factor 4; retry if ever not enough.
  std::u16string nfd(static_cast<size_t>(src_len) * 4 + 8, u'\0');
  UErrorCode err = U_ZERO_ERROR;
  int32_t n = unorm2_normalize(kNfd, src, src_len, reinterpret_cast<UChar*>(nfd.data()),
                               static_cast<int32_t>(nfd.size()), &err);
  if (err == U_BUFFER_OVERFLOW_ERROR) {
    nfd.assign(static_cast<size_t>(n), u'\0');
    err = U_ZERO_ERROR;
    n = unorm2_normalize(kNfd, src, src_len, reinterpret_cast<UChar*>(nfd.data()), n, &err);
  }
  TUPE_CHECK(U_SUCCESS(err), "ICU: unorm2_normalize (NFD) failed: " << u_errorName(err));
  const auto* d = reinterpret_cast<const UChar*>(nfd.data());
  for (int32_t i = 0; i < n;) {
    UChar32 c;
    U16_NEXT(d, i, n, c);
    const auto cp = static_cast<char32_t>(c);
    if (!(flags(cp) & kAccent)) append_cased(cp, lower_case, out);
  }
}


}  // namespace

uint8_t compute_flags(char32_t cp) {
  if (cp < 0x80) return ascii_flags(static_cast<unsigned char>(cp));
  const auto c = static_cast<UChar32>(cp);
  if (cp == 0xFFFD) return kRemoved;
  const UCharCategory cat = category_in_unicode_8(cp);
  if (cat == U_CONTROL_CHAR || cat == U_FORMAT_CHAR || cat == U_PRIVATE_USE_CHAR) return kRemoved;
  if (u_isUWhiteSpace(c)) return kWhitespace;
  uint8_t f = 0;
  switch (cat) {
    case U_CONNECTOR_PUNCTUATION:
    case U_DASH_PUNCTUATION:
    case U_START_PUNCTUATION:
    case U_END_PUNCTUATION:
    case U_INITIAL_PUNCTUATION:
    case U_FINAL_PUNCTUATION:
    case U_OTHER_PUNCTUATION:
      f |= kPunctuation;
      break;
    case U_NON_SPACING_MARK:
      f |= kAccent;
      break;
    default:
      break;
  }
  if (is_cjk(cp)) f |= kCjk;
  const bool decomposes = u_getIntPropertyValue(c, UCHAR_NFD_QUICK_CHECK) != UNORM_YES && !keeps_whole(cp);
  if ((f & kAccent) || decomposes || u_getCombiningClass(c) != 0 ||
      u_hasBinaryProperty(c, UCHAR_CHANGES_WHEN_LOWERCASED) || newer_lower(cp) != 0)
    f |= kNeedsNormalize;
  return f;
}

uint8_t flags(char32_t cp) {
  static const std::unique_ptr<const std::array<uint8_t, 0x10000>> kBmp = [] {
    auto t = std::make_unique<std::array<uint8_t, 0x10000>>();
    for (char32_t c = 0; c < 0x10000; ++c) (*t)[c] = (c >= 0xD800 && c <= 0xDFFF) ? uint8_t{kRemoved} : compute_flags(c);
    return std::unique_ptr<const std::array<uint8_t, 0x10000>>(std::move(t));
  }();
  return cp < 0x10000 ? (*kBmp)[cp] : compute_flags(cp);
}

void normalize_run(const std::u32string& run, bool strip_accents, bool lower_case, std::u32string& out,
                   std::u16string& scratch) {
  if (!strip_accents) {
    for (char32_t cp : run) append_cased(cp, lower_case, out);
    return;
  }
  // NFD of the whole run (canonical reordering crosses character boundaries), then drop the
  // accents (Mn) and lower-case what is left (HF: nfd, filter !Mn, lowercase, in that order).
  // A character HF does not decompose (keeps_whole) is a starter: the run is cut there.
  size_t begin = 0;
  while (begin < run.size()) {
    size_t end = begin;
    while (end < run.size() && !keeps_whole(run[end])) ++end;
    nfd_strip_lower(run, begin, end, lower_case, out, scratch);
    if (end < run.size()) append_cased(run[end++], lower_case, out);
    begin = end;
  }
}

}  // namespace tupe::data_pipeline::bert_chars
