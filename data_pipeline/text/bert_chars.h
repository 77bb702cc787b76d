// Character classes of BERT's basic tokenizer, exactly as HuggingFace `tokenizers` (Rust)
// computes them in BertNormalizer and BertPreTokenizer, looked up through ICU.
//
// HF's rules (tokenizers/src/normalizers/bert.rs, pre_tokenizers/bert.rs):
//   removed      U+0000, U+FFFD, and "control" = general category Cc, Cf or Co, except
//                TAB, LF, CR (clean_text)
//   whitespace   TAB, LF, CR and the White_Space property (clean_text maps them to ' ',
//                the pre-tokenizer splits on them and drops them)
//   punctuation  ASCII punctuation (33-47, 58-64, 91-96, 123-126, which includes the ASCII
//                symbols $ + < = > ^ ` | ~) or category P* (Pc Pd Ps Pe Pi Pf Po): each one
//                becomes a word of its own
//   CJK          the CJK Unified Ideograph blocks (4E00-9FFF, 3400-4DBF, 20000-2A6DF,
//                2A700-2B73F, 2B740-2B81F, 2B920-2CEAF, F900-FAFF, 2F800-2FA1F): each one
//                becomes a word of its own
//   accent       category Mn (removed after NFD when accents are stripped)
// HF's Unicode data are older than ICU 72's (Unicode 15.0), and not all of one version:
// categories from the `unicode_categories` 0.1.1 crate (Unicode 8.0: a character assigned
// later has no class), NFD from `unicode-normalization-alignments` (before 13.0), lower-case
// mappings from Rust's std (17.0). bert_chars.cpp lists every resulting difference (a few
// category changes, one decomposition, the capitals of 16.0/17.0), and tests/text checks every
// code point against HF, so a newer HF build that moves these shows up as a test failure.
#pragma once
#include <cstdint>
#include <string>

namespace tupe::data_pipeline::bert_chars {

enum Flag : uint8_t {
  kRemoved = 1,        ///< dropped by clean_text
  kWhitespace = 2,     ///< word separator (dropped)
  kPunctuation = 4,    ///< isolated as a word of its own
  kCjk = 8,            ///< isolated as a word of its own (before NFD)
  kAccent = 16,        ///< Mn: removed after NFD when stripping accents
  kNeedsNormalize = 32 ///< NFD, accent stripping or lower-casing may change it (non-ASCII only)
};

/// The Flag bits of code point `cp` (a Unicode scalar value, not a surrogate). Pure and
/// thread-safe: the BMP is served from a table built once on first use, the rest by ICU.
uint8_t flags(char32_t cp);

/// The flags computed without the BMP table (what the table is built from).
uint8_t compute_flags(char32_t cp);

/// Appends to `out` the BERT normalisation of `run`, characters that survived clean_text and
/// are not separated by a starter (ASCII, whitespace, CJK end a run): with `strip_accents`
/// the NFD of the whole run (canonical reordering crosses characters) minus the kAccent
/// (Mn) characters, then with `lower_case` each character's full lower-case mapping (as
/// Rust's char::to_lowercase: SpecialCasing, no context). `scratch` is reused memory.
/// Throws tupe::Error if ICU fails.
void normalize_run(const std::u32string& run, bool strip_accents, bool lower_case, std::u32string& out,
                   std::u16string& scratch);

/// ASCII-only classes for the hot loop: kRemoved, kWhitespace, kPunctuation or 0 (a word byte).
constexpr uint8_t ascii_flags(unsigned char b) {
  if (b == '\t' || b == '\n' || b == '\r' || b == ' ') return kWhitespace;
  if (b < 0x20 || b == 0x7F) return kRemoved;
  if ((b >= 33 && b <= 47) || (b >= 58 && b <= 64) || (b >= 91 && b <= 96) || (b >= 123 && b <= 126))
    return kPunctuation;
  return 0;
}

}  // namespace tupe::data_pipeline::bert_chars
