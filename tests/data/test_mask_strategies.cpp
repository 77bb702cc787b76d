// data.mask_strategy on real text (WikiText-2 test split, BERT's uncased vocabulary): the word
// boundaries against the vocabulary file, whole-word units against Hugging Face's words, and
// the whole_word and span rules of masker.h (whole units, one 80/10/10 draw per unit or span,
// the budget bounds, SpanBERT's length distribution), each from the test's own reading.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cctype>
#include <cmath>
#include <fstream>
#include <map>

#include "data_pipeline/masker.h"
#include "data_pipeline/text/tokenizer_factory.h"
#include "data_test_util.h"

namespace tupe::data_pipeline {
namespace {

constexpr int64_t kMaxIds = 126;  // a sequence: [CLS], at most 126 ids of a line, [SEP]

struct RealText {
  std::unique_ptr<Tokenizer> tokenizer;
  std::shared_ptr<const WordBoundaries> words;
  std::vector<std::vector<int32_t>> sequences;
  RealText() {
    TokenizerOptions t;
    t.vocab = test::vocab_path();
    tokenizer = make_tokenizer(t);
    words = WordBoundaries::of(*tokenizer);
    std::ifstream in(test::wikitext_test_path());
    std::string line;
    const SpecialTokens sp = tokenizer->special_tokens();
    while (std::getline(in, line) && sequences.size() < 1500) {
      std::vector<int32_t> ids = tokenizer->encode(line);
      if (ids.size() < 4) continue;
      if (static_cast<int64_t>(ids.size()) > kMaxIds) ids.resize(kMaxIds);
      ids.insert(ids.begin(), sp.cls);
      ids.push_back(sp.sep);
      sequences.push_back(std::move(ids));
    }
  }
};

const RealText& real_text() {
  static const RealText t;
  return t;
}

bool special(const SpecialTokens& s, int32_t id) {
  return id == s.pad || id == s.unk || id == s.cls || id == s.sep || id == s.mask;
}

/// Words by the test's own reading: a non-special piece whose vocabulary entry starts with
/// "##" continues the word before it unless a special token precedes it. [begin, end) each.
std::vector<std::pair<int32_t, int32_t>> words_of(const Tokenizer& tok, const std::vector<int32_t>& ids) {
  const SpecialTokens sp = tok.special_tokens();
  std::vector<std::pair<int32_t, int32_t>> out;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (special(sp, ids[i])) continue;
    const bool glue = i > 0 && !special(sp, ids[i - 1]) && tok.piece(ids[i]).rfind("##", 0) == 0;
    if (glue)
      out.back().second = static_cast<int32_t>(i + 1);
    else
      out.emplace_back(static_cast<int32_t>(i), static_cast<int32_t>(i + 1));
  }
  return out;
}

/// The word of each position as the masker groups them (-1 for special tokens): with every word
/// chosen (mask_probability 1) and [MASK]-or-kept at 1/2 (no random ids), positions of one word
/// always share their fate; neighbours of different words differ in one of 48 draws but with
/// probability 2^-48.
std::vector<int32_t> masker_words(const std::vector<int32_t>& ids) {
  const RealText& t = real_text();
  MaskingConfig c;
  c.mask_probability = 1;
  c.replace_with_mask = 0.5;
  c.replace_with_random = 0;
  c.strategy = MaskStrategy::kWholeWord;
  const Masker m(c, t.tokenizer->special_tokens(), t.tokenizer->vocab_size(), 99, t.words);
  const SpecialTokens sp = t.tokenizer->special_tokens();
  const size_t n = ids.size();
  std::vector<uint64_t> fate(n, 0);
  std::vector<MaskedToken> out;
  std::vector<int32_t> scratch;
  for (int64_t draw = 0; draw < 48; ++draw) {
    m.mask(0, draw, ids.data(), static_cast<int64_t>(n), out, scratch);
    for (const auto& x : out) fate[static_cast<size_t>(x.position)] |= static_cast<uint64_t>(x.replacement == sp.mask) << draw;
  }
  std::vector<int32_t> word(n, -1);
  int32_t w = -1;
  for (size_t i = 0; i < n; ++i) {
    if (special(sp, ids[i])) continue;
    if (i == 0 || word[i - 1] < 0 || fate[i] != fate[i - 1]) ++w;
    word[i] = w;
  }
  return word;
}

TEST(DataMaskStrategies, WordBoundariesFollowTheVocabularyFile) {
  const RealText& t = real_text();
  std::ifstream in(test::vocab_path());
  std::string entry;
  int64_t id = 0, continuing = 0;
  while (std::getline(in, entry)) {
    if (!entry.empty() && entry.back() == '\r') entry.pop_back();
    const bool want = entry.rfind("##", 0) == 0;
    continuing += want;
    ASSERT_EQ(t.words->continues(static_cast<int32_t>(id)), want) << "id " << id << " '" << entry << "'";
    ++id;
  }
  EXPECT_EQ(id, 30522);
  EXPECT_EQ(t.words->continuation_count(), continuing);
  EXPECT_GT(continuing, 5000);
  EXPECT_EQ(t.words->vocab_sha256(), t.tokenizer->vocab_sha256());
}

TEST(DataMaskStrategies, WholeWordUnitsAreHuggingFacesWords) {
  const RealText& t = real_text();
  test::TempDir dir("hf-words");
  const std::string out = dir / "words.jsonl";
  const auto r = test::run_command(test::python() + " " + test::test_source_dir() + "/hf_word_groups.py " +
                                   test::vocab_path() + " " + test::wikitext_test_path() + " 400 " + out);
  ASSERT_EQ(r.status, 0) << r.output;
  std::ifstream in(out);
  std::string line;
  int64_t rows = 0, multi_piece = 0, collator_merges = 0;
  const SpecialTokens sp = t.tokenizer->special_tokens();
  while (std::getline(in, line)) {
    const auto j = nlohmann::json::parse(line);
    std::vector<int32_t> ids = j["ids"].get<std::vector<int32_t>>();
    std::vector<int64_t> hf = j["word_ids"].get<std::vector<int64_t>>();
    std::vector<int64_t> collator = j["collator_words"].get<std::vector<int64_t>>();
    const auto n = std::min<size_t>(ids.size(), kMaxIds);
    ids.resize(n);
    ids.insert(ids.begin(), sp.cls);
    ids.push_back(sp.sep);
    const std::vector<int32_t> ours = masker_words(ids);
    for (size_t i = 1; i < n; ++i) {  // neighbours k - 1 and k of the line are positions i and i + 1
      if (ours[i] < 0 || ours[i + 1] < 0) continue;  // [UNK]: never masked, in no word of ours
      const bool same_ours = ours[i] == ours[i + 1];
      ASSERT_EQ(same_ours, hf[i - 1] == hf[i]) << "row " << rows << " tokens " << i - 1 << "," << i << " ("
                                               << t.tokenizer->piece(ids[i]) << " " << t.tokenizer->piece(ids[i + 1])
                                               << ")";
      multi_piece += same_ours;
      // The collator's words run from gap to gap in the text: unions of ours, split by BERT's
      // pre-tokenizer only at punctuation or a CJK ideograph ("1990," is two of ours, one of its).
      if (same_ours) ASSERT_EQ(collator[i - 1], collator[i]) << "row " << rows << " token " << i;
      if (!same_ours && collator[i - 1] == collator[i]) {
        ++collator_merges;
        const std::string a = t.tokenizer->piece(ids[i]), b = t.tokenizer->piece(ids[i + 1]);
        // BERT's pre-tokenizer makes one-character words of punctuation and CJK ideographs.
        const auto split_off = [](const std::string& p) {
          const auto lead = static_cast<unsigned char>(p.empty() ? 0 : p[0]);
          const size_t bytes = lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
          return p.size() == bytes && (bytes > 1 || std::ispunct(lead));
        };
        ASSERT_TRUE(split_off(a) || split_off(b)) << "row " << rows << ": '" << a << "' '" << b << "'";
      }
    }
    ++rows;
  }
  EXPECT_EQ(rows, 400);
  EXPECT_GT(multi_piece, 500) << "words of several pieces were compared";
  EXPECT_GT(collator_merges, 100) << "punctuation glued to a word in the text was seen";
}

/// Per sample: every masked position's word is masked whole, its pieces share one treatment,
/// and budget - (longest word - 1) <= masked <= budget (= budget when every word is one piece).
struct Tally {
  int64_t samples = 0, masked = 0, budget = 0, units = 0, units_masked_as_mask = 0, units_random = 0;
  int64_t unit_words = 0;  // words in maximal masked runs (span: several words per run)
  int64_t runs = 0;
};

Tally check_strategy(MaskStrategy strategy) {
  const RealText& t = real_text();
  MaskingConfig c;
  c.strategy = strategy;
  const Masker m(c, t.tokenizer->special_tokens(), t.tokenizer->vocab_size(), 1234, t.words);
  const SpecialTokens sp = t.tokenizer->special_tokens();
  Tally tally;
  std::vector<MaskedToken> out;
  std::vector<int32_t> scratch;
  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    for (size_t s = 0; s < t.sequences.size(); ++s) {
      const auto& ids = t.sequences[s];
      const auto n = static_cast<int64_t>(ids.size());
      m.mask(epoch, static_cast<int64_t>(s), ids.data(), n, out, scratch);
      const auto words = words_of(*t.tokenizer, ids);
      int64_t candidates = 0, longest = 0;
      for (const auto& [b, e] : words) {
        candidates += e - b;
        longest = std::max<int64_t>(longest, e - b);
      }
      const int64_t budget = std::max<int64_t>(1, std::llround(0.15 * static_cast<double>(candidates)));
      std::map<int32_t, const MaskedToken*> at;
      for (const auto& x : out) at[x.position] = &x;
      int64_t masked_words = 0;
      bool previous_masked = false;
      for (const auto& [b, e] : words) {
        int64_t hit = 0, as_mask = 0, kept = 0;
        for (int32_t p = b; p < e; ++p) {
          const auto it = at.find(p);
          if (it == at.end()) continue;
          ++hit;
          EXPECT_EQ(it->second->original, ids[static_cast<size_t>(p)]);
          as_mask += it->second->replacement == sp.mask;
          kept += it->second->replacement == it->second->original;
        }
        EXPECT_TRUE(hit == 0 || hit == e - b) << "a word masked in part, sample " << s;
        if (hit == 0) {
          previous_masked = false;
          continue;
        }
        ++masked_words;
        // One draw per word: all [MASK], or none (random ids may equal the original, rarely).
        EXPECT_TRUE(as_mask == 0 || as_mask == hit) << "sample " << s;
        if (strategy == MaskStrategy::kWholeWord) {
          ++tally.units;
          tally.units_masked_as_mask += as_mask == hit;
          tally.units_random += as_mask == 0 && kept < hit;
        }
        const bool adjacent = previous_masked && b > 0 && !special(sp, ids[static_cast<size_t>(b - 1)]);
        tally.runs += !adjacent;
        previous_masked = true;
      }
      const auto m_count = static_cast<int64_t>(out.size());
      int64_t shortest = longest;
      for (const auto& [b, e] : words) shortest = std::min<int64_t>(shortest, e - b);
      if (shortest > budget) {  // no word fits: exactly one word, whole
        EXPECT_EQ(masked_words, 1) << "sample " << s;
      } else {
        EXPECT_LE(m_count, budget) << "sample " << s;
        EXPECT_GT(m_count, budget - longest) << "sample " << s;
      }
      if (longest == 1) EXPECT_EQ(m_count, budget) << "sample " << s;
      for (size_t k = 1; k < out.size(); ++k) EXPECT_LT(out[k - 1].position, out[k].position);
      tally.samples += 1;
      tally.masked += m_count;
      tally.budget += budget;
      tally.unit_words += masked_words;
    }
  }
  return tally;
}

TEST(DataMaskStrategies, WholeWordMasksWholeWordsWithinTheBudget) {
  const Tally t = check_strategy(MaskStrategy::kWholeWord);
  ASSERT_EQ(t.samples, 4500);
  const double fill = static_cast<double>(t.masked) / static_cast<double>(t.budget);
  std::printf("whole_word: %lld of a budget of %lld tokens masked (%.4f), %lld words\n",
              static_cast<long long>(t.masked), static_cast<long long>(t.budget), fill, static_cast<long long>(t.units));
  EXPECT_GT(fill, 0.97);
  // 80/10/10 per word, within 5 binomial standard deviations.
  const double u = static_cast<double>(t.units);
  EXPECT_NEAR(static_cast<double>(t.units_masked_as_mask) / u, 0.8, 5 * std::sqrt(0.16 / u));
  EXPECT_NEAR(static_cast<double>(t.units_random) / u, 0.1, 5 * std::sqrt(0.09 / u));
}

TEST(DataMaskStrategies, SpanLengthsFollowTheClippedGeometric) {
  // q(l) = 0.2 * 0.8^(l-1) / (1 - 0.8^10), l = 1..10: the share of u in [0, 1) mapped to l.
  const int64_t grid = 1000000;
  std::vector<int64_t> hits(11, 0);
  for (int64_t i = 0; i < grid; ++i) ++hits[static_cast<size_t>(span_length_words((static_cast<double>(i) + 0.5) / grid))];
  const double norm = 1 - std::pow(0.8, 10);
  double mean = 0;
  for (int64_t l = 1; l <= 10; ++l) {
    const double q = 0.2 * std::pow(0.8, static_cast<double>(l - 1)) / norm;
    EXPECT_NEAR(static_cast<double>(hits[static_cast<size_t>(l)]) / grid, q, 2.0 / grid) << "l = " << l;
    mean += static_cast<double>(l) * q;
  }
  EXPECT_EQ(hits[0], 0);
  EXPECT_NEAR(mean, 3.797, 0.001);  // SpanBERT's "mean 3.8"
  EXPECT_EQ(span_length_words(0.0), 1);
  EXPECT_EQ(span_length_words(std::nextafter(1.0, 0.0)), 10);
}

TEST(DataMaskStrategies, SpansAreRunsOfWholeWordsWithinTheBudget) {
  const Tally span = check_strategy(MaskStrategy::kSpan);
  const Tally word = check_strategy(MaskStrategy::kWholeWord);
  const double fill = static_cast<double>(span.masked) / static_cast<double>(span.budget);
  const double span_run = static_cast<double>(span.unit_words) / static_cast<double>(span.runs);
  const double word_run = static_cast<double>(word.unit_words) / static_cast<double>(word.runs);
  std::printf("span: %.4f of the budget masked, %.2f words per masked run (whole_word: %.2f)\n", fill, span_run,
              word_run);
  EXPECT_GT(fill, 0.97);
  // Spans draw 3.78 words on average (cut by the budget, the end and masked words), whole
  // words one: runs of masked words are much longer with spans.
  EXPECT_GT(span_run, 2.0);
  EXPECT_LT(word_run, 1.5);
}

TEST(DataMaskStrategies, EachStrategyIsAPureFunctionOfSeedEpochAndIndex) {
  const RealText& t = real_text();
  for (const MaskStrategy strategy : {MaskStrategy::kToken, MaskStrategy::kWholeWord, MaskStrategy::kSpan}) {
    SCOPED_TRACE(to_string(strategy));
    MaskingConfig c;
    c.strategy = strategy;
    const SpecialTokens sp = t.tokenizer->special_tokens();
    const Masker a(c, sp, 30522, 5, t.words), b(c, sp, 30522, 5, t.words), other(c, sp, 30522, 6, t.words);
    std::vector<MaskedToken> x, y;
    std::vector<int32_t> scratch;
    int differ_epoch = 0, differ_seed = 0, compared = 0;
    for (size_t s = 0; s < t.sequences.size() && compared < 200; ++s) {
      const auto& ids = t.sequences[s];
      if (ids.size() < 64) continue;  // a budget of >= 9 tokens: two draws agree by chance too rarely to matter
      ++compared;
      const auto n = static_cast<int64_t>(ids.size());
      a.mask(2, static_cast<int64_t>(s), ids.data(), n, x, scratch);
      b.mask(2, static_cast<int64_t>(s), ids.data(), n, y, scratch);
      ASSERT_EQ(x.size(), y.size());
      for (size_t k = 0; k < x.size(); ++k) {
        ASSERT_EQ(x[k].position, y[k].position);
        ASSERT_EQ(x[k].replacement, y[k].replacement);
      }
      a.mask(3, static_cast<int64_t>(s), ids.data(), n, y, scratch);
      differ_epoch += y.size() != x.size() || !std::equal(x.begin(), x.end(), y.begin(), [](auto& p, auto& q) {
        return p.position == q.position;
      });
      other.mask(2, static_cast<int64_t>(s), ids.data(), n, y, scratch);
      differ_seed += y.size() != x.size() || !std::equal(x.begin(), x.end(), y.begin(), [](auto& p, auto& q) {
        return p.position == q.position;
      });
    }
    ASSERT_EQ(compared, 200);
    EXPECT_EQ(differ_epoch, 200);
    EXPECT_EQ(differ_seed, 200);
  }
}

TEST(DataMaskStrategies, ASequenceWhoseWordsAllExceedTheBudgetGetsOneWord) {
  // "antidisestablishmentarianism" is w = 8 pieces in BERT's vocabulary: [CLS], 2 of them, [SEP]
  // -> c = 2 w, k = round(0.15 c) = 2 < w.
  const RealText& t = real_text();
  std::vector<int32_t> ids = t.tokenizer->encode("antidisestablishmentarianism antidisestablishmentarianism");
  const auto w = static_cast<int32_t>(ids.size() / 2);
  ASSERT_EQ(w, 8);
  const SpecialTokens sp = t.tokenizer->special_tokens();
  ids.insert(ids.begin(), sp.cls);
  ids.push_back(sp.sep);
  for (const MaskStrategy strategy : {MaskStrategy::kWholeWord, MaskStrategy::kSpan}) {
    MaskingConfig c;
    c.strategy = strategy;
    const Masker m(c, sp, t.tokenizer->vocab_size(), 3, t.words);
    std::vector<MaskedToken> out;
    std::vector<int32_t> scratch;
    int first_word = 0;
    for (int64_t i = 0; i < 200; ++i) {
      m.mask(0, i, ids.data(), static_cast<int64_t>(ids.size()), out, scratch);
      ASSERT_EQ(out.size(), static_cast<size_t>(w)) << to_string(strategy) << ": one whole word, though k = 2";
      ASSERT_TRUE(out.front().position == 1 || out.front().position == 1 + w);
      ASSERT_EQ(out.back().position, out.front().position + w - 1);
      first_word += out.front().position == 1;
    }
    EXPECT_GT(first_word, 60) << "either word is drawn";
    EXPECT_LT(first_word, 140);
  }
}

TEST(DataMaskStrategies, TheStrategyNeedsWordBoundariesOfTheVocabulary) {
  const RealText& t = real_text();
  MaskingConfig c;
  c.strategy = MaskStrategy::kSpan;
  test::expect_error([&] { Masker(c, t.tokenizer->special_tokens(), 30522, 1); },
                     {"data.mask_strategy = span", "tokenizer.vocab"});
  test::expect_error([&] { Masker(c, t.tokenizer->special_tokens(), 30000, 1, t.words); },
                     {"data.mask_strategy = span", "30522 ids", "30000"});
  c.strategy = MaskStrategy::kToken;  // token ignores them
  EXPECT_NO_THROW(Masker(c, t.tokenizer->special_tokens(), 30000, 1, t.words));
}

}  // namespace
}  // namespace tupe::data_pipeline
