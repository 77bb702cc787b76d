// WordPiece vs HuggingFace BertTokenizerFast: the ids of every line of the real texts, a few
// targeted strings, and the character classes of every code point, all against the files the
// fixture hf_reference_ids.py wrote in this CTest run (TUPE_TEXT_HF_REF names the folder).
#include <gtest/gtest.h>

#include <map>
#include <sstream>

#include "data_pipeline/text/bert_chars.h"
#include "data_pipeline/text/wordpiece.h"
#include "text_test_util.h"

namespace tupe::data_pipeline {
namespace {

using text_test::parse_ids;
using text_test::read_bytes;
using text_test::shared_data;
using text_test::split_lines;

std::string reference_dir() {
  const char* d = std::getenv("TUPE_TEXT_HF_REF");
  if (!d || !*d) throw std::runtime_error("TUPE_TEXT_HF_REF is not set (run through CTest)");
  const std::string dir = d;
  // The fixture writes DONE last: without it the reference is incomplete (the Python step failed).
  read_bytes(dir + "/DONE");
  return dir;
}

WordPieceTokenizer make(bool uncased) {
  WordPieceOptions o;
  o.vocab_path = uncased ? text_test::uncased_vocab() : text_test::cased_vocab();
  o.lower_case = o.strip_accents = uncased;
  return WordPieceTokenizer(o);
}

std::string render(const WordPieceTokenizer& t, const std::vector<int32_t>& ids, size_t from) {
  std::ostringstream os;
  for (size_t i = from; i < ids.size() && i < from + 8; ++i) os << ids[i] << "(" << t.id_to_token(ids[i]) << ") ";
  return os.str();
}

/// Compares ids line by line; reports the first differing line and token.
void expect_same_ids(const WordPieceTokenizer& t, const std::string& label, const std::vector<std::string_view>& lines,
                     const std::vector<std::string_view>& expected_lines) {
  ASSERT_GE(expected_lines.size(), lines.size()) << label << ": reference has fewer lines than the text";
  int64_t differing = 0, tokens = 0;
  std::vector<int32_t> got;
  for (size_t i = 0; i < lines.size(); ++i) {
    got.clear();
    t.encode_into(lines[i], got);
    const std::vector<int32_t> want = parse_ids(expected_lines[i]);
    tokens += static_cast<int64_t>(want.size());
    if (got == want) continue;
    if (++differing > 3) continue;
    size_t k = 0;
    while (k < got.size() && k < want.size() && got[k] == want[k]) ++k;
    ADD_FAILURE() << label << ": line " << (i + 1) << " differs first at token " << k << "\n  text: "
                  << lines[i].substr(0, 300) << "\n  HF:   " << render(t, want, k) << "\n  ours: " << render(t, got, k);
  }
  EXPECT_EQ(differing, 0) << label << ": " << differing << " of " << lines.size() << " lines differ";
  EXPECT_GT(tokens, 0) << label;
  std::cout << label << ": " << lines.size() << " lines, " << tokens << " tokens compared\n";
}

void check_text(const std::string& text, bool uncased) {
  const std::string dir = reference_dir();
  const WordPieceTokenizer t = make(uncased);
  const std::string bytes = read_bytes(shared_data() + "/text/" + text);
  const std::string stem = text.substr(text.find_last_of('/') + 1);
  const std::string ref = read_bytes(dir + "/" + stem + (uncased ? ".bert-base-uncased.ids" : ".bert-base-cased.ids"));
  expect_same_ids(t, stem + (uncased ? " (uncased)" : " (cased)"), split_lines(bytes), split_lines(ref));
}

TEST(TextWordPieceParity, WikiText2Uncased) { check_text("wikitext-2/wiki.test.raw", true); }
TEST(TextWordPieceParity, WikiText2Cased) { check_text("wikitext-2/wiki.test.raw", false); }
TEST(TextWordPieceParity, TinyShakespeareUncased) { check_text("tiny-shakespeare.txt", true); }
TEST(TextWordPieceParity, TinyShakespeareCased) { check_text("tiny-shakespeare.txt", false); }
TEST(TextWordPieceParity, BertSampleTextUncased) { check_text("bert-sample-text.txt", true); }
TEST(TextWordPieceParity, BertSampleTextCased) { check_text("bert-sample-text.txt", false); }

std::string unhex(std::string_view hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) out.push_back(static_cast<char>(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16)));
  return out;
}

void check_cases(bool uncased) {
  const WordPieceTokenizer t = make(uncased);
  const std::string ref = read_bytes(reference_dir() + (uncased ? "/cases.bert-base-uncased.tsv" : "/cases.bert-base-cased.tsv"));
  std::vector<std::string> inputs;
  std::vector<std::string_view> expected;
  for (std::string_view line : split_lines(ref)) {
    if (line.empty()) continue;
    const size_t tab = line.find('\t');
    ASSERT_NE(tab, std::string_view::npos);
    inputs.push_back(unhex(line.substr(0, tab)));
    expected.push_back(line.substr(tab + 1));
  }
  ASSERT_GE(inputs.size(), 15u);
  const std::vector<std::string_view> views(inputs.begin(), inputs.end());
  expect_same_ids(t, uncased ? "targeted cases (uncased)" : "targeted cases (cased)", views, expected);
}

TEST(TextWordPieceParity, TargetedCasesUncased) { check_cases(true); }
TEST(TextWordPieceParity, TargetedCasesCased) { check_cases(false); }

// Every code point: HF's clean_text / whitespace / punctuation / CJK decisions and its
// NFD + accent strip + lower-case result, against bert_chars (ICU with Unicode 8.0 categories).
TEST(TextWordPieceParity, CharacterClassesOfEveryCodePoint) {
  const std::string ref = read_bytes(reference_dir() + "/char_classes.tsv");
  std::vector<uint8_t> want_flags(0x110000, 0xFF);
  std::map<char32_t, std::u32string> want_map;
  for (std::string_view line : split_lines(ref)) {
    if (line.empty()) continue;
    std::istringstream in{std::string(line)};
    std::string first;
    in >> first;
    if (first == "map") {
      std::string cp, out;
      in >> cp;
      std::u32string mapped;
      while (in >> out) mapped.push_back(static_cast<char32_t>(std::stoul(out, nullptr, 16)));
      want_map[static_cast<char32_t>(std::stoul(cp, nullptr, 16))] = mapped;
    } else {
      std::string last;
      int flags = 0;
      in >> last >> flags;
      for (auto c = std::stoul(first, nullptr, 16); c <= std::stoul(last, nullptr, 16); ++c)
        want_flags[c] = static_cast<uint8_t>(flags);
    }
  }
  int64_t flag_mismatches = 0, map_mismatches = 0;
  std::u32string got;
  std::u16string scratch;
  for (char32_t c = 0; c < 0x110000; ++c) {
    if (c >= 0xD800 && c <= 0xDFFF) continue;
    ASSERT_NE(want_flags[c], 0xFF) << "reference misses U+" << std::hex << static_cast<uint32_t>(c);
    const uint8_t ours = bert_chars::flags(c);
    const uint8_t cls = ours & (bert_chars::kRemoved | bert_chars::kWhitespace | bert_chars::kPunctuation | bert_chars::kCjk);
    if (cls != want_flags[c] && ++flag_mismatches <= 200)
      ADD_FAILURE() << "U+" << std::hex << static_cast<uint32_t>(c) << ": flags " << int{cls} << ", HF "
                    << int{want_flags[c]};
    if (want_flags[c] & (bert_chars::kRemoved | bert_chars::kWhitespace)) continue;  // never normalised
    got.clear();
    if (c < 0x80)  // the ASCII fast path of bert_basic_split lower-cases A-Z itself
      got.push_back(c >= U'A' && c <= U'Z' ? c + 32 : c);
    else if (ours & bert_chars::kNeedsNormalize)
      bert_chars::normalize_run(std::u32string(1, c), true, true, got, scratch);
    else
      got.push_back(c);
    const auto it = want_map.find(c);
    const std::u32string want = it == want_map.end() ? std::u32string(1, c) : it->second;
    if (got != want && ++map_mismatches <= 200) {
      std::ostringstream g, w;
      for (char32_t o : got) g << std::hex << static_cast<uint32_t>(o) << " ";
      for (char32_t o : want) w << std::hex << static_cast<uint32_t>(o) << " ";
      ADD_FAILURE() << "U+" << std::hex << static_cast<uint32_t>(c) << ": normalised to [" << g.str() << "], HF ["
                    << w.str() << "]";
    }
  }
  EXPECT_EQ(flag_mismatches, 0);
  EXPECT_EQ(map_mismatches, 0);
}

}  // namespace
}  // namespace tupe::data_pipeline
