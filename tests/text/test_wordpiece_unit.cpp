// WordPiece on hand-made vocabularies (expected pieces worked out by hand from the greedy
// longest-match-first rule), vocabulary file errors, and the TokenizerOptions table.
#include <gtest/gtest.h>

#include <thread>

#include "data_pipeline/text/tokenizer_factory.h"
#include "data_pipeline/text/wordpiece.h"
#include "text_test_util.h"

namespace tupe::data_pipeline {
namespace {

using text_test::ScratchDir;

// Ids: the line numbers below, from 0.
constexpr const char* kTinyVocab =
    "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n"  // 0-4
    "ba\n##na\nun\n##aff\n##able\n"          // 5-9
    "hello\n,\n.\n!\ncafe\n"                 // 10-14
    "caf\n##\xC3\xA9\n\xE4\xB8\xAD\n##a\n";  // 15-18: caf ##é 中 ##a

struct Tiny {
  ScratchDir dir{"wp"};
  WordPieceTokenizer make(bool lower, int64_t max_chars = 100) {
    WordPieceOptions o;
    o.vocab_path = dir.write("vocab.txt", kTinyVocab);
    o.lower_case = o.strip_accents = lower;
    o.max_word_chars = max_chars;
    return WordPieceTokenizer(o);
  }
};

using Ids = std::vector<int32_t>;

TEST(TextWordPiece, GreedyLongestMatchFirst) {
  Tiny tiny;
  const auto t = tiny.make(true);
  EXPECT_EQ(t.encode("banana"), (Ids{5, 6, 6}));
  EXPECT_EQ(t.encode("unaffable"), (Ids{7, 8, 9}));
  EXPECT_EQ(t.encode("nanana"), (Ids{1}));             // no piece starts the word
  EXPECT_EQ(t.encode("banan"), (Ids{1}));              // "n" has no piece: whole word unknown
  EXPECT_EQ(t.encode("bana ba"), (Ids{5, 6, 5}));
  EXPECT_EQ(t.encode("Hello, BANANA!"), (Ids{10, 11, 5, 6, 6, 13}));
  EXPECT_EQ(t.encode("  \t\r\n "), (Ids{}));
  EXPECT_EQ(t.encode(""), (Ids{}));
}

TEST(TextWordPiece, LowerCasingAndAccents) {
  Tiny tiny;
  const auto lower = tiny.make(true);
  const auto cased = tiny.make(false);
  EXPECT_EQ(lower.encode("CAF\xC3\x89"), (Ids{14}));      // CAFÉ -> cafe
  EXPECT_EQ(cased.encode("caf\xC3\xA9"), (Ids{15, 16}));  // café -> caf ##é
  EXPECT_EQ(cased.encode("Hello"), (Ids{1}));
  EXPECT_EQ(lower.encode("cafe\xCC\x81"), (Ids{14}));     // e + combining acute -> cafe
}

TEST(TextWordPiece, CjkControlAndSpecialLiterals) {
  Tiny tiny;
  const auto t = tiny.make(true);
  EXPECT_EQ(t.encode("ba\xE4\xB8\xAD" "ba"), (Ids{5, 17, 5}));  // 中 is split out
  EXPECT_EQ(t.encode("ba\x01na\xEF\xBB\xBF" "na"), (Ids{5, 6, 6}));  // control and BOM dropped inside a word
  EXPECT_EQ(t.encode("[MASK]banana[SEP]"), (Ids{4, 5, 6, 6, 3}));
  EXPECT_EQ(t.encode("[mask]"), (Ids{1, 1, 1}));  // only the exact literal is special: [ mask ]
}

TEST(TextWordPiece, MaxWordChars) {
  Tiny tiny;
  const auto t = tiny.make(true, 6);
  EXPECT_EQ(t.encode("banana"), (Ids{5, 6, 6}));  // 6 characters: allowed
  EXPECT_EQ(t.encode("bananaa"), (Ids{1}));       // 7: [UNK] whatever the pieces
  EXPECT_EQ(tiny.make(false, 4).encode("caf\xC3\xA9"), (Ids{15, 16}));  // 4 characters (5 bytes)
}

TEST(TextWordPiece, DecodeGluesContinuations) {
  Tiny tiny;
  const auto t = tiny.make(true);
  EXPECT_EQ(t.decode({5, 6, 6, 11, 10, 2}), "banana , hello [CLS]");
  EXPECT_EQ(t.decode({}), "");
  EXPECT_THROW(t.decode({19}), Error);
  EXPECT_THROW(t.decode({-1}), Error);
  EXPECT_EQ(t.token_to_id("##na"), 6);
  EXPECT_EQ(t.token_to_id("na"), -1);
}

TEST(TextWordPiece, AcceptsCrlfVocabulary) {
  ScratchDir dir("crlf");
  WordPieceOptions o;
  o.vocab_path = dir.write("vocab.txt", "[PAD]\r\n[UNK]\r\n[CLS]\r\n[SEP]\r\n[MASK]\r\nok\r\n");
  const WordPieceTokenizer t(o);
  EXPECT_EQ(t.vocab_size(), 6);
  EXPECT_EQ(t.encode("OK"), (Ids{5}));
}

/// The message of the tupe::Error `f` throws ("" if none).
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(TextWordPiece, BadVocabularyFilesNameFileAndLine) {
  ScratchDir dir("badvocab");
  auto load = [&](const std::string& name, const std::string& bytes) {
    const std::string path = dir.write(name, bytes);
    return error_of([&] {
      WordPieceOptions o;
      o.vocab_path = path;
      WordPieceTokenizer t(o);
    });
  };
  const std::string specials = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n";
  const std::string missing = dir.file("absent.txt");
  EXPECT_EQ(error_of([&] {
              WordPieceOptions o;
              o.vocab_path = missing;
              WordPieceTokenizer t(o);
            }),
            missing + ": cannot open: No such file or directory");
  EXPECT_EQ(load("empty.txt", ""), dir.file("empty.txt") + ": empty vocabulary (no tokens)");
  EXPECT_EQ(load("dup.txt", specials + "ba\nna\nba\n"),
            dir.file("dup.txt") + ": line 8: duplicate token 'ba' (first on line 6)");
  EXPECT_EQ(load("nomask.txt", "[PAD]\n[UNK]\n[CLS]\n[SEP]\nword\n"), dir.file("nomask.txt") + ": special token [MASK] missing");
  EXPECT_EQ(load("blank.txt", specials + "a\n\nb\n"), dir.file("blank.txt") + ": line 7: empty token");
  EXPECT_EQ(load("space.txt", specials + "a b\n"), dir.file("space.txt") + ": line 6: token contains a space or control character");
  EXPECT_EQ(load("utf8.txt", specials + "ok\nb\xFFz\n"),
            dir.file("utf8.txt") + ": line 7: invalid UTF-8 at byte 35: byte that never occurs in UTF-8");
  // Every message is one line.
  EXPECT_EQ(load("dup2.txt", specials + "x\nx\n").find('\n'), std::string::npos);
}

TEST(TextTokenizerOptions, FieldTableRoundTripsAndValidates) {
  const auto& table = TokenizerOptions::fields();
  TokenizerOptions o;
  const KeyValues kv = table.to_kv(o);
  EXPECT_EQ(kv, (KeyValues{{"kind", "wordpiece"}, {"vocab", ""}, {"lower_case", "true"}, {"max_word_chars", "100"}}));
  table.apply(o, {{"kind", "sentencepiece"}, {"lower_case", "false"}, {"max_word_chars", "50"}, {"vocab", "m.model"}},
              "test");
  EXPECT_EQ(o.kind, TokenizerKind::kSentencePiece);
  EXPECT_FALSE(o.lower_case);
  EXPECT_EQ(o.max_word_chars, 50);
  EXPECT_EQ(o.vocab, "m.model");
  EXPECT_NE(error_of([&] { table.apply(o, {{"vocab_file", "x"}}, "cfg [tokenizer]"); }).find("unknown key 'vocab_file'"),
            std::string::npos);
  TokenizerOptions bad;
  bad.vocab = "v.txt";
  // kind is an enum: a wrong word is refused when the section is read.
  EXPECT_EQ(error_of([&] {
              table.apply(bad, {{"kind", "bpe"}}, "cfg [tokenizer]");
            }),
            "cfg [tokenizer]: key 'kind': expected wordpiece or sentencepiece, got 'bpe'");
  EXPECT_EQ(error_of([] { parse_tokenizer_kind("tokenizer.kind", "bpe"); }),
            "tokenizer.kind: expected wordpiece or sentencepiece, got 'bpe'");
  EXPECT_EQ(bad.kind, TokenizerKind::kWordPiece);
  for (const auto k : {TokenizerKind::kWordPiece, TokenizerKind::kSentencePiece})
    EXPECT_EQ(parse_tokenizer_kind("k", to_string(k)), k);
  bad.max_word_chars = 0;
  EXPECT_EQ(error_of([&] { bad.validate(); }), "tokenizer.max_word_chars: must be positive, got 0");
  EXPECT_EQ(error_of([] { make_tokenizer(TokenizerOptions{}); }), "tokenizer.vocab: no vocabulary path given");
}

TEST(TextTokenizerOptions, MakesTheBertUncasedTokenizer) {
  TokenizerOptions o;
  o.vocab = text_test::uncased_vocab();
  const auto t = make_tokenizer(o);
  EXPECT_EQ(t->kind(), "wordpiece");
  EXPECT_TRUE(t->lower_case());
  EXPECT_EQ(t->vocab_size(), 30522);
  const SpecialTokens s = t->special_tokens();
  EXPECT_EQ(s.pad, 0);
  EXPECT_EQ(s.unk, 100);
  EXPECT_EQ(s.cls, 101);
  EXPECT_EQ(s.sep, 102);
  EXPECT_EQ(s.mask, 103);
  EXPECT_EQ(t->vocab_sha256().size(), 64u);
  // Well-known BERT ids: "hello" 7592, "world" 2088 (lines 7593 and 2089 of vocab.txt).
  EXPECT_EQ(t->encode("Hello world"), (Ids{7592, 2088}));
  EXPECT_EQ(t->encode("unaffable").size(), 3u);
  EXPECT_EQ(t->decode(t->encode("unaffable")), "unaffable");
}

TEST(TextWordPiece, ConcurrentEncodesAgree) {
  TokenizerOptions o;
  o.vocab = text_test::uncased_vocab();
  const auto t = make_tokenizer(o);
  const std::string text = text_test::read_bytes(text_test::shared_data() + "/text/bert-sample-text.txt");
  ASSERT_FALSE(text.empty());
  const Ids once = t->encode(text);
  Ids a, b;
  std::thread ta([&] {
    for (int i = 0; i < 20; ++i) a = t->encode(text);
  });
  std::thread tb([&] {
    for (int i = 0; i < 20; ++i) b = t->encode(text);
  });
  ta.join();
  tb.join();
  EXPECT_EQ(a, once);
  EXPECT_EQ(b, once);
}

}  // namespace
}  // namespace tupe::data_pipeline
