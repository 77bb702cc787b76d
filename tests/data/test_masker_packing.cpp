// Masker rule and determinism, sequence packing rules, document splitting of raw text, and
// the words of preprocess.packing / preprocess.documents.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "data_pipeline/corpus.h"
#include "data_pipeline/counter_rng.h"
#include "data_pipeline/masker.h"
#include "data_pipeline/packing.h"
#include "data_pipeline/preprocess.h"
#include "data_test_util.h"

namespace tupe::data_pipeline {
namespace {

std::vector<int32_t> random_sequence(uint64_t seed, int64_t len, bool with_unk) {
  CounterRng rng(seed);
  std::vector<int32_t> s(static_cast<size_t>(len));
  s.front() = 101;
  s.back() = 102;
  for (int64_t j = 1; j + 1 < len; ++j) {
    s[static_cast<size_t>(j)] = 1000 + static_cast<int32_t>(rng.below(29000));
    if (with_unk && j % 7 == 0) s[static_cast<size_t>(j)] = 100;  // [UNK] is never masked
  }
  return s;
}

TEST(DataMasker, CountRuleSortedPositionsNoSpecialTokens) {
  const Masker m(MaskingConfig{}, SpecialTokens{}, 30522, 3);
  std::vector<MaskedToken> out;
  std::vector<int32_t> scratch;
  for (int64_t len : {3, 4, 9, 20, 57, 128, 512}) {
    for (uint64_t s = 0; s < 20; ++s) {
      const auto ids = random_sequence(s * 1000 + static_cast<uint64_t>(len), len, true);
      int64_t candidates = 0;
      for (const int32_t id : ids) candidates += (id != 101 && id != 102 && id != 100) ? 1 : 0;
      m.mask(0, static_cast<int64_t>(s), ids.data(), len, out, scratch);
      // The documented rule: max(1, round(0.15 c)), c = non-special tokens.
      const int64_t expect = std::max<int64_t>(1, std::llround(0.15 * static_cast<double>(candidates)));
      ASSERT_EQ(static_cast<int64_t>(out.size()), expect) << "len " << len;
      EXPECT_EQ(m.count(ids.data(), len), expect);
      for (size_t k = 0; k < out.size(); ++k) {
        EXPECT_TRUE(k == 0 || out[k - 1].position < out[k].position) << "sorted, distinct";
        EXPECT_EQ(out[k].original, ids[static_cast<size_t>(out[k].position)]);
        EXPECT_FALSE(m.is_special(out[k].original));
        EXPECT_TRUE(out[k].replacement == 103 || !m.is_special(out[k].replacement));
      }
    }
  }
  // Only special tokens: nothing to mask.
  const std::vector<int32_t> specials{101, 100, 102};
  m.mask(0, 0, specials.data(), 3, out, scratch);
  EXPECT_TRUE(out.empty());
  // The cap.
  MaskingConfig capped;
  capped.max_predictions = 5;
  const auto long_ids = random_sequence(1, 128, false);
  Masker(capped, SpecialTokens{}, 30522, 3).mask(0, 0, long_ids.data(), 128, out, scratch);
  EXPECT_EQ(out.size(), 5u);
}

TEST(DataMasker, PureFunctionOfSeedEpochAndIndex) {
  const Masker a(MaskingConfig{}, SpecialTokens{}, 30522, 11);
  const Masker b(MaskingConfig{}, SpecialTokens{}, 30522, 11);
  const Masker other_seed(MaskingConfig{}, SpecialTokens{}, 30522, 12);
  std::vector<MaskedToken> x, y;
  std::vector<int32_t> scratch;
  auto same = [](const std::vector<MaskedToken>& p, const std::vector<MaskedToken>& q) {
    if (p.size() != q.size()) return false;
    for (size_t k = 0; k < p.size(); ++k)
      if (p[k].position != q[k].position || p[k].replacement != q[k].replacement) return false;
    return true;
  };
  int differ_epoch = 0, differ_index = 0, differ_seed = 0;
  const int trials = 200;
  for (int i = 0; i < trials; ++i) {
    const auto ids = random_sequence(static_cast<uint64_t>(i), 128, false);
    a.mask(4, i, ids.data(), 128, x, scratch);
    b.mask(4, i, ids.data(), 128, y, scratch);
    EXPECT_TRUE(same(x, y)) << "same (seed, epoch, index) -> same mask";
    b.mask(5, i, ids.data(), 128, y, scratch);
    differ_epoch += !same(x, y);
    b.mask(4, i + 1, ids.data(), 128, y, scratch);
    differ_index += !same(x, y);
    other_seed.mask(4, i, ids.data(), 128, y, scratch);
    differ_seed += !same(x, y);
  }
  EXPECT_EQ(differ_epoch, trials) << "another epoch gives another mask";
  EXPECT_EQ(differ_index, trials);
  EXPECT_EQ(differ_seed, trials);
}

/// Documents with distinct ids (no [SEP] inside), for the packing tests.
std::vector<std::vector<int32_t>> documents(const std::vector<int64_t>& lengths) {
  std::vector<std::vector<int32_t>> docs;
  int32_t next = 1000;
  for (const int64_t n : lengths) {
    docs.emplace_back();
    for (int64_t k = 0; k < n; ++k) docs.back().push_back(next++);
  }
  return docs;
}

std::vector<std::vector<int32_t>> pack(Packing mode, int64_t max_len, const std::vector<std::vector<int32_t>>& docs) {
  std::vector<std::vector<int32_t>> seqs;
  SequencePacker p(mode, max_len, SpecialTokens{},
                   [&](const int32_t* ids, int64_t n) { seqs.emplace_back(ids, ids + n); });
  for (const auto& d : docs) {
    p.begin_document();
    // Add in sentence-sized parts: packing must not depend on how a document is split.
    for (size_t k = 0; k < d.size(); k += 3)
      p.add_tokens(std::vector<int32_t>(d.begin() + static_cast<std::ptrdiff_t>(k),
                                        d.begin() + static_cast<std::ptrdiff_t>(std::min(d.size(), k + 3))));
  }
  p.finish();
  return seqs;
}

TEST(DataPacking, FullSentencesFillSequencesAcrossDocuments) {
  const int64_t L = 16;
  const auto docs = documents({5, 30, 1, 12, 13, 0, 40, 7});
  const auto seqs = pack(Packing::kFullSentences, L, docs);
  std::vector<int32_t> content_no_sep, expected;
  for (const auto& d : docs) expected.insert(expected.end(), d.begin(), d.end());
  int64_t short_ones = 0;
  for (size_t s = 0; s < seqs.size(); ++s) {
    const auto& q = seqs[s];
    ASSERT_GE(q.size(), 3u);
    EXPECT_EQ(q.front(), 101);
    EXPECT_EQ(q.back(), 102);
    EXPECT_NE(q[1], 102) << "no sequence starts with a document separator";
    EXPECT_NE(q[q.size() - 2], 102) << "no sequence ends [SEP] [SEP]";
    if (s + 1 < seqs.size()) {
      EXPECT_GE(static_cast<int64_t>(q.size()), L - 1) << "only the last of a stream is short";
      short_ones += static_cast<int64_t>(q.size()) < L;
    }
    EXPECT_LE(static_cast<int64_t>(q.size()), L);
    for (size_t j = 1; j + 1 < q.size(); ++j)
      if (q[j] != 102) content_no_sep.push_back(q[j]);
  }
  EXPECT_EQ(content_no_sep, expected) << "every token once, in order";
  EXPECT_LE(short_ones, 2);
  // Separators: between consecutive non-empty documents, inside a sequence, exactly one [SEP].
  std::vector<int32_t> flat;  // content with separators, sequence wrappers removed
  for (const auto& q : seqs) flat.insert(flat.end(), q.begin() + 1, q.end() - 1);
  for (size_t d = 0; d + 1 < docs.size(); ++d) {
    if (docs[d].empty()) continue;
    size_t e = d + 1;
    while (e < docs.size() && docs[e].empty()) ++e;
    if (e == docs.size()) break;
    const auto last = std::find(flat.begin(), flat.end(), docs[d].back());
    ASSERT_NE(last, flat.end());
    const bool at_cut = [&] {  // the document ended a sequence: the closing [SEP] separates
      for (const auto& q : seqs)
        if (q[q.size() - 2] == docs[d].back()) return true;
      return false;
    }();
    if (!at_cut) {
      EXPECT_EQ(*(last + 1), 102) << "document " << d << " is followed by [SEP]";
    }
    EXPECT_EQ(*(last + (at_cut ? 1 : 2)), docs[e].front());
  }
}

TEST(DataPacking, DocumentModeNeverCrossesDocuments) {
  const int64_t L = 10;
  const auto docs = documents({5, 8, 9, 20, 1});
  const auto seqs = pack(Packing::kDocument, L, docs);
  size_t s = 0;
  for (const auto& d : docs) {
    const size_t pieces = (d.size() + static_cast<size_t>(L) - 3) / static_cast<size_t>(L - 2);
    std::vector<int32_t> got;
    for (size_t k = 0; k < pieces; ++k, ++s) {
      ASSERT_LT(s, seqs.size());
      EXPECT_EQ(seqs[s].front(), 101);
      EXPECT_EQ(seqs[s].back(), 102);
      got.insert(got.end(), seqs[s].begin() + 1, seqs[s].end() - 1);
    }
    EXPECT_EQ(got, d);
  }
  EXPECT_EQ(s, seqs.size());
}

TEST(DataCorpus, DocumentsByBlankLinesOrLinesWithCrlfAndBom) {
  const std::string text = "\xEF\xBB\xBF = Title = \r\nfirst line\r\nsecond\r\n \r\n\r\nthird doc\n\t\nlast";
  const auto docs = split_documents("t.txt", text, DocumentBoundary::kBlankLine);
  ASSERT_EQ(docs.size(), 3u);
  EXPECT_EQ(text.substr(static_cast<size_t>(docs[0].begin), static_cast<size_t>(docs[0].end - docs[0].begin)),
            " = Title = \r\nfirst line\r\nsecond");
  std::vector<std::string> lines;
  for_each_line(text, docs[0], [&](std::string_view l) { lines.emplace_back(l); });
  EXPECT_EQ(lines, (std::vector<std::string>{" = Title = ", "first line", "second"}));
  EXPECT_EQ(text.substr(static_cast<size_t>(docs[1].begin), 9), "third doc");
  EXPECT_EQ(docs[2].end, static_cast<int64_t>(text.size()));
  const auto per_line = split_documents("t.txt", text, DocumentBoundary::kLine);
  EXPECT_EQ(per_line.size(), 5u);
  EXPECT_EQ(per_line[0].begin, 3) << "the byte-order mark is skipped";
  test::expect_error([] { split_documents("blank.txt", " \r\n\n\t\n", DocumentBoundary::kBlankLine); },
                     {"blank.txt", "no text"});
  test::expect_error([] { split_documents("bad.txt", "abc\ndef\xC3(x", DocumentBoundary::kLine); },
                     {"bad.txt: invalid UTF-8 at byte 7"});
}

TEST(DataPreprocessConfig, PackingAndDocumentsAreWordsInConfigsAndEnumsInCode) {
  for (const auto& c : kPackingWords) EXPECT_EQ(parse_packing("k", to_string(c.value)), c.value) << c.word;
  for (const auto& c : kDocumentBoundaryWords) EXPECT_EQ(parse_document_boundary("k", to_string(c.value)), c.value);
  EXPECT_EQ(to_string(Packing::kFullSentences), "full_sentences");
  EXPECT_EQ(to_string(DocumentBoundary::kBlankLine), "blank_line");
  test::expect_error([] { parse_packing("preprocess.packing", "sentences"); },
                     {"preprocess.packing: expected full_sentences or document, got 'sentences'"});
  PreprocessOptions c;
  const auto& table = PreprocessOptions::fields();
  EXPECT_EQ(table.to_kv(c).at("packing"), "full_sentences");
  EXPECT_EQ(table.to_kv(c).at("documents"), "blank_line");
  table.apply(c, {{"packing", "document"}, {"documents", "line"}}, "p.ini [preprocess]");
  EXPECT_EQ(c.packing, Packing::kDocument);
  EXPECT_EQ(c.documents, DocumentBoundary::kLine);
  test::expect_error(
      [&] {
        table.apply(c, {{"documents", "paragraph"}}, "p.ini [preprocess]");
      },
      {"p.ini [preprocess]: key 'documents': expected blank_line or line, got 'paragraph'"});
}

}  // namespace
}  // namespace tupe::data_pipeline
