// SentencePiece vocabulary training on tiny-shakespeare: reserved special ids, round trip
// decode(encode(x)) == x (up to SentencePiece's whitespace normalisation and, when asked,
// lower-casing), and the errors of bad input; the kind of a vocabulary file read from its bytes.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "data_pipeline/text/sentencepiece_tokenizer.h"
#include "data_pipeline/sentencepiece_train.h"
#include "common/sha256.h"
#include "data_pipeline/text/tokenizer_factory.h"
#include "data_pipeline/text/vocab_file.h"
#include "text_test_util.h"

namespace tupe::data_pipeline {
namespace {

using text_test::read_bytes;
using text_test::ScratchDir;
using text_test::split_lines;

std::string shakespeare() { return text_test::shared_data() + "/text/tiny-shakespeare.txt"; }

/// What SentencePiece's default normaliser does to plain ASCII text: runs of spaces
/// collapse to one, leading and trailing spaces go (remove_extra_whitespaces).
std::string squeeze_spaces(std::string_view s, bool lower) {
  std::string out;
  for (char c : s) {
    if (c == ' ' && (out.empty() || out.back() == ' ')) continue;
    out.push_back(lower && c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c);
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

/// Trains, loads through make_tokenizer, and checks ids and round trips on every line.
void train_and_check(const std::string& input, SentencePieceModelType model_type, int64_t vocab_size, bool lower) {
  ScratchDir dir("spm_" + to_string(model_type));
  VocabOptions o;
  o.input = input;
  o.model = dir.file("shakespeare.model");
  o.vocab_size = vocab_size;
  o.model_type = model_type;
  o.lower_case = lower;
  o.character_coverage = 1.0;
  const SentencePieceTrainResult r = train_sentencepiece(o);
  EXPECT_EQ(r.vocab_size, vocab_size);
  EXPECT_EQ(r.sha256, file_sha256_hex(o.model));
  EXPECT_FALSE(std::filesystem::exists(o.model + ".tmp"));
  const auto listing = split_lines(read_bytes(r.vocab_path));
  ASSERT_EQ(static_cast<int64_t>(listing.size()), vocab_size + 1);  // + the empty text after the last '\n'
  EXPECT_EQ(listing[4].substr(0, 7), "[MASK]\t");

  TokenizerOptions to;
  to.kind = TokenizerKind::kSentencePiece;
  to.vocab = o.model;
  to.lower_case = lower;
  const auto t = make_tokenizer(to);
  EXPECT_EQ(t->kind(), "sentencepiece");
  EXPECT_EQ(t->vocab_size(), vocab_size);
  EXPECT_EQ(t->vocab_sha256(), r.sha256);
  const SpecialTokens s = t->special_tokens();
  EXPECT_EQ(s.pad, SentencePieceReservedIds::kPad);
  EXPECT_EQ(s.unk, SentencePieceReservedIds::kUnk);
  EXPECT_EQ(s.cls, SentencePieceReservedIds::kCls);
  EXPECT_EQ(s.sep, SentencePieceReservedIds::kSep);
  EXPECT_EQ(s.mask, SentencePieceReservedIds::kMask);

  const std::string text = read_bytes(input);
  int64_t lines = 0, tokens = 0, mismatches = 0;
  for (std::string_view line : split_lines(text)) {
    const std::vector<int32_t> ids = t->encode(line);
    ++lines;
    tokens += static_cast<int64_t>(ids.size());
    // Text never yields the special tokens (they are control pieces), nor [UNK] at full coverage.
    EXPECT_TRUE(std::none_of(ids.begin(), ids.end(), [](int32_t id) { return id <= SentencePieceReservedIds::kMask; }))
        << line;
    const std::string want = squeeze_spaces(line, lower);
    if (t->decode(ids) != want && ++mismatches <= 3)
      ADD_FAILURE() << "round trip of line " << lines << ": '" << line << "' -> '" << t->decode(ids) << "'";
  }
  EXPECT_EQ(mismatches, 0);
  // The literal "[MASK]" in text is ordinary characters, not the mask id.
  const auto mask_text = t->encode("[MASK]");
  EXPECT_EQ(std::count(mask_text.begin(), mask_text.end(), s.mask), 0);
  // Subword units: fewer tokens than characters, more than words.
  EXPECT_LT(tokens, static_cast<int64_t>(text.size()) / 2);
  std::cout << to_string(model_type) << ": " << lines << " lines, " << tokens << " tokens\n";

  // The other lower-case setting is refused: the model's normaliser decides.
  to.lower_case = !lower;
  EXPECT_NE(error_of([&] { make_tokenizer(to); }).find(o.model + ": the model "), std::string::npos);
}

TEST(TextSentencePieceTrain, UnigramCasedOnTinyShakespeare) {
  train_and_check(shakespeare(), SentencePieceModelType::kUnigram, 2000, false);
}

TEST(TextSentencePieceTrain, BpeLowerCasedOnPartOfTinyShakespeare) {
  ScratchDir dir("spm_part");
  const std::string text = read_bytes(shakespeare());
  const std::string part = dir.write("part.txt", text.substr(0, 200000));
  train_and_check(part, SentencePieceModelType::kBpe, 1000, true);
}

TEST(TextSentencePieceTrain, BadInputAndOptions) {
  ScratchDir dir("spm_bad");
  VocabOptions o;
  o.model = dir.file("m.model");
  o.input = dir.file("absent.txt");
  EXPECT_EQ(error_of([&] { train_sentencepiece(o); }), o.input + ": no such file or directory");
  o.input = dir.write("bad.txt", "good line\nbad \xC3\xC3 line\n");
  EXPECT_EQ(error_of([&] { train_sentencepiece(o); }),
            o.input + ": line 2: invalid UTF-8 at byte 14: sequence truncated (missing continuation byte)");
  o.input = dir.write("bad.jsonl", "{\"text\": \"to be\"}\n{\"txt\": \"or not\"}\n");
  EXPECT_EQ(error_of([&] { train_sentencepiece(o); }), o.input + ": line 2: no \"text\" field");
  // The output folder is made before training; a file in its place is refused up front.
  o.input = shakespeare();
  const std::string file = dir.write("a_file", "x");
  o.model = file + "/sub/m.model";
  EXPECT_EQ(error_of([&] { train_sentencepiece(o); }).rfind(file + "/sub: cannot create the output folder (", 0), 0u);
  o.model = dir.file("m.model");
  // A vocabulary larger than the corpus can fill: SentencePiece refuses; nothing is left behind.
  o.input = dir.write("small.txt", "to be or not to be\nthat is the question\n");
  o.vocab_size = 5000;
  const std::string e = error_of([&] { train_sentencepiece(o); });
  EXPECT_NE(e.find(o.model + ": SentencePiece training failed"), std::string::npos) << e;
  EXPECT_EQ(e.find('\n'), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(o.model));
  EXPECT_FALSE(std::filesystem::exists(o.model + ".tmp"));
  // model_type is an enum: a wrong word is refused when the [vocab] section is read.
  EXPECT_EQ(error_of([&] {
              VocabOptions::fields().apply(o, {{"model_type", "wordpiece"}}, "v.ini [vocab]");
            }),
            "v.ini [vocab]: key 'model_type': expected unigram or bpe, got 'wordpiece'");
  EXPECT_EQ(error_of([] { parse_sentencepiece_model_type("vocab.model_type", "wordpiece"); }),
            "vocab.model_type: expected unigram or bpe, got 'wordpiece'");
  VocabOptions::fields().apply(o, {{"model_type", "bpe"}}, "v.ini [vocab]");
  EXPECT_EQ(o.model_type, SentencePieceModelType::kBpe);
  EXPECT_EQ(VocabOptions::fields().to_kv(o).at("model_type"), "bpe");
  o.vocab_size = 5;
  EXPECT_NE(error_of([&] { o.validate(); }).find("vocab.vocab_size:"), std::string::npos);
}

// The kind of a vocabulary file comes from its bytes: a trained model is a protobuf, the
// listing beside it and a BERT vocab.txt are text (the listing is "<piece>\t<score>" lines).
TEST(TextVocabFile, KindFromTheContentNotTheName) {
  ScratchDir dir("spm_kind");
  VocabOptions o;
  o.input = text_test::shared_data() + "/text/bert-sample-text.txt";
  o.model = dir.file("sample.model");
  o.vocab_size = 300;
  const SentencePieceTrainResult r = train_sentencepiece(o);
  const std::string bert = text_test::uncased_vocab();
  EXPECT_EQ(sniff_vocab_file(r.model_path), VocabFileContent::kSentencePieceModel);
  EXPECT_EQ(sniff_vocab_file(r.vocab_path), VocabFileContent::kSentencePieceListing);
  EXPECT_EQ(sniff_vocab_file(bert), VocabFileContent::kText);
  // Names say nothing: a model called vocab.txt is still a model.
  const std::string disguised = dir.write("vocab.txt", read_bytes(r.model_path));
  EXPECT_EQ(sniff_vocab_file(disguised), VocabFileContent::kSentencePieceModel);
  EXPECT_EQ(sniff_vocab_file(dir.write("junk.bin", std::string("\x00\x01junk", 6))), VocabFileContent::kOther);

  TokenizerOptions t;  // kind not given: the file decides
  t.vocab = r.model_path;
  EXPECT_EQ(resolve_tokenizer_kind(t, false), TokenizerKind::kSentencePiece);
  t.vocab = disguised;
  EXPECT_EQ(resolve_tokenizer_kind(t, false), TokenizerKind::kSentencePiece);
  t.vocab = bert;
  t.kind = TokenizerKind::kSentencePiece;
  EXPECT_EQ(resolve_tokenizer_kind(t, false), TokenizerKind::kWordPiece);
  // Given, it must agree, in one line that names the kind to set.
  EXPECT_EQ(error_of([&] { resolve_tokenizer_kind(t, true); }),
            bert + ": UTF-8 text (a WordPiece vocab.txt), but tokenizer.kind = sentencepiece (a .model); set "
                   "tokenizer.kind = wordpiece, or leave it out (the file tells)");
  t.vocab = r.model_path;
  t.kind = TokenizerKind::kWordPiece;
  EXPECT_EQ(error_of([&] { make_tokenizer(t); }),
            r.model_path + ": a SentencePiece model, but tokenizer.kind = wordpiece (a vocab.txt); set "
                           "tokenizer.kind = sentencepiece, or leave it out (the file tells)");
  // The listing is no vocabulary: the message points at the model written with it.
  t.vocab = r.vocab_path;
  for (const bool given : {false, true})
    EXPECT_EQ(error_of([&] { resolve_tokenizer_kind(t, given); }),
              r.vocab_path + ": a SentencePiece .vocab listing (a piece and its score a line), which no tokenizer "
                             "loads; pass the model written with it (" + r.model_path + ")");
  t.vocab = dir.file("absent.model");
  EXPECT_EQ(error_of([&] { resolve_tokenizer_kind(t, false); }), t.vocab + ": cannot open: No such file or directory");
}

TEST(TextSentencePieceTokenizer, BadModelFiles) {
  ScratchDir dir("spm_badmodel");
  const std::string missing = dir.file("absent.model");
  EXPECT_EQ(error_of([&] { SentencePieceTokenizer t(missing, true); }), missing + ": cannot open: No such file or directory");
  const std::string junk = dir.write("junk.model", "this is not a protobuf");
  EXPECT_NE(error_of([&] { SentencePieceTokenizer t(junk, true); }).find(junk + ": not a SentencePiece model"),
            std::string::npos);
}

}  // namespace
}  // namespace tupe::data_pipeline
