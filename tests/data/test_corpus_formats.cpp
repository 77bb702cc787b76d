// Input formats of `tupe preprocess` (corpus_stream.h): the same documents of real text
// (WikiText-2 test, one document per line; mixed-english validation, blank-line documents)
// as plain text, gzip (two members), zstd, JSON lines and compressed JSON lines, written by
// make_format_inputs.py, must give identical shards; bad records and damaged streams are
// named with the file and the line, and leave no shard.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <tuple>

#include "data_pipeline/corpus_stream.h"
#include "data_pipeline/dataset.h"
#include "data_test_util.h"

namespace fs = std::filesystem;

namespace tupe::data_pipeline {
namespace {

/// Every format of `source` under dir/<name>.* (make_format_inputs.py).
void make_inputs(const test::TempDir& dir, const std::string& source, const std::string& name, const std::string& mode) {
  const auto r = test::run_command(test::python() + " " + test::test_source_dir() + "/make_format_inputs.py " + source +
                                   " " + dir.str() + " " + name + " " + mode);
  ASSERT_EQ(r.status, 0) << r.output;
}

/// The token ids of every sequence of a split of a shard folder, in order.
std::vector<std::vector<int32_t>> sequences(const std::string& folder, const std::string& split) {
  DatasetOptions o;
  o.split = split;
  const auto ds = open_pretrain_dataset({folder}, o);
  std::vector<std::vector<int32_t>> out(static_cast<size_t>(ds->size()));
  Sample s;
  for (int64_t i = 0; i < ds->size(); ++i) {
    ds->get(i, s);
    out[static_cast<size_t>(i)] = s.token_ids;
  }
  return out;
}

/// Preprocesses each input with `args` into dir/out-<k>; expects every run to give the first
/// run's train (and validation) sequences; returns the number of train sequences.
size_t expect_identical(const test::TempDir& dir, const std::vector<std::string>& inputs, const std::string& args,
                        bool validation) {
  std::vector<std::vector<int32_t>> train0, valid0;
  for (size_t k = 0; k < inputs.size(); ++k) {
    const std::string out = dir / ("out-" + std::to_string(k));
    const auto r = test::run_preprocess_quietly("--overwrite --input " + inputs[k] + " --output " + out + " " + args);
    EXPECT_EQ(r.status, 0) << r.output;
    if (r.status != 0) continue;
    const auto train = sequences(out, "train");
    const auto valid = validation ? sequences(out, "validation") : decltype(train){};
    if (k == 0) {
      train0 = train;
      valid0 = valid;
      EXPECT_GT(train0.size(), 100u) << inputs[k];
      if (validation) {
        EXPECT_GT(valid0.size(), 2u) << inputs[k];
      }
      continue;
    }
    EXPECT_TRUE(train == train0) << inputs[k] << " (" << train.size() << " train sequences) vs " << inputs[0] << " ("
                                 << train0.size() << ")";
    EXPECT_TRUE(valid == valid0) << inputs[k] << " (" << valid.size() << " validation sequences) vs " << inputs[0]
                                 << " (" << valid0.size() << ")";
  }
  return train0.size();
}

TEST(DataCorpusFormats, EveryFormatOfWikiTextGivesTheSameShards) {
  test::TempDir dir("formats-wiki");
  make_inputs(dir, test::wikitext_test_path(), "wiki", "line");
  const std::string w = dir / "wiki";
  // Within a record format: many pieces, two shards of each split, a validation share; the
  // compressed files' pieces are cut over the decompressed text like the plain file's.
  const std::string many = "--preprocess.documents line --preprocess.piece_bytes 65536 --preprocess.num_shards 3 "
                           "--preprocess.num_validation_shards 2 --preprocess.validation_ratio 0.05 --preprocess.seed 3";
  expect_identical(dir, {w + ".txt", w + ".txt.gz", w + ".txt.zst", w + ".gzdata --preprocess.input_format text"}, many,
                   true);
  expect_identical(dir, {w + ".jsonl", w + ".jsonl.gz", w + ".jsonl.zst"}, many, true);
  // Across record formats (byte offsets differ, so one piece and no validation split): the
  // same documents give the same sequences.
  const size_t n = expect_identical(dir, {w + ".txt", w + ".jsonl", w + ".jsonl.zst", w + ".jsonl.gz", w + ".txt.zst"},
                                    "--preprocess.documents line --preprocess.piece_bytes 100000000 "
                                    "--preprocess.validation_ratio 0",
                                    false);
  EXPECT_GT(n, 2000u);
}

TEST(DataCorpusFormats, BlankLineDocumentsOfMixedEnglishAndAFolderOfFormats) {
  test::TempDir dir("formats-mixed");
  make_inputs(dir, test::shared_data() + "/text/mixed-english/validation.txt", "me", "blank_line");
  const std::string m = dir / "me";
  const std::string many = "--preprocess.piece_bytes 65536 --preprocess.num_shards 2 --preprocess.validation_ratio 0.1";
  expect_identical(dir, {m + ".txt", m + ".txt.gz", m + ".txt.zst"}, many, true);
  expect_identical(dir, {m + ".jsonl", m + ".jsonl.gz", m + ".jsonl.zst"}, many, true);
  expect_identical(dir, {m + ".txt", m + ".jsonl.gz"}, "--preprocess.piece_bytes 100000000 --preprocess.validation_ratio 0",
                   false);
  // A folder read recursively in sorted order: a/me.jsonl.zst then b/me.txt.gz, the same as
  // naming the two files in that order.
  fs::create_directories(dir / "tree/a");
  fs::create_directories(dir / "tree/b");
  fs::copy_file(m + ".jsonl.zst", dir / "tree/a/me.jsonl.zst");
  fs::copy_file(m + ".txt.gz", dir / "tree/b/me.txt.gz");
  expect_identical(dir, {dir / "tree", dir / "tree/a/me.jsonl.zst --input " + (dir / "tree/b/me.txt.gz")}, many, true);
}

/// Exit status 1 and one error line holding every fragment; no shard in `out`.
void expect_refused(const std::string& input, const std::string& out, std::initializer_list<std::string> fragments,
                    const std::string& args = "") {
  const auto r = test::run_preprocess_quietly("--input " + input + " --output " + out + " " + args);
  EXPECT_EQ(r.status, 1) << r.output;
  const std::string last = test::one_error_line(r.output);
  for (const auto& f : fragments) EXPECT_NE(last.find(f), std::string::npos) << "'" << f << "' not in: " << last;
  EXPECT_TRUE(!fs::exists(out) || fs::is_empty(out)) << out << " holds files after a failed run";
}

TEST(DataCorpusFormats, BadRecordsAndDamagedStreamsAreNamed) {
  test::TempDir dir("formats-bad");
  make_inputs(dir, test::wikitext_test_path(), "wiki", "line");
  // Bad records deep in real data: line 2001 of the JSON lines, read plain (the error's line
  // is counted from the file start, whatever the piece) and compressed.
  std::ifstream in(dir / "wiki.jsonl");
  std::string line, good;
  for (int i = 0; i < 2000 && std::getline(in, line); ++i) good += line + "\n";
  const struct {
    const char* name;
    std::string record;
    std::string cause;
  } bad[] = {{"syntax", "{\"text\": \"unclosed\"", "invalid JSON"},
             {"missing", "{\"id\": 7, \"meta\": {\"text\": \"nested\"}}", "no \"text\" field"},
             {"number", "{\"text\": 12}", "field \"text\" is a number, not a string"},
             {"array", "[\"text\"]", "not a JSON object"},
             {"surrogate", "{\"text\": \"\\ud800\"}", "invalid JSON"},
             {"utf8", "{\"text\": \"bad \xFF byte\"}", "ill-formed UTF-8"}};
  for (const auto& b : bad) {
    const std::string path = dir / (std::string("bad-") + b.name + ".jsonl");
    test::write_file(path, good + b.record + "\n{\"text\": \"after\"}\n");
    expect_refused(path, dir / "out", {path, "line 2001", b.cause}, "--preprocess.piece_bytes 4096");
    const auto z = test::run_command("zstd -q -f " + path + " -o " + path + ".zst");
    ASSERT_EQ(z.status, 0) << z.output;
    expect_refused(path + ".zst", dir / "out", {path + ".zst", "line 2001", b.cause});
  }
  // Another field name, holding numbers.
  expect_refused(dir / "wiki.jsonl.gz", dir / "out", {"wiki.jsonl.gz", "line 1", "field \"id\" is a number"},
                 "--preprocess.text_field id");
  // Truncated streams (the file ends inside a gzip member / zstd frame).
  for (const char* ext : {".txt.gz", ".jsonl.zst"}) {
    const std::string whole = dir / (std::string("wiki") + ext), cut = dir / (std::string("cut") + ext);
    fs::copy_file(whole, cut);
    fs::resize_file(cut, fs::file_size(whole) * 2 / 3);
    expect_refused(cut, dir / "out",
                   {cut, std::string("truncated ") + (std::string(ext).find("gz") != std::string::npos ? "gzip" : "zstd") +
                             " stream"});
  }
  // A damaged checksum (gzip's CRC-32 in the member trailer, zstd's frame checksum), and a
  // gzip member followed by something that is not one.
  for (const auto& [from, to, cause] : {std::tuple<std::string, std::string, std::string>{"wiki.gzdata", "crc.txt.gz",
                                                                                            "incorrect data check"},
                                        {"wiki.txt.zst", "sum.txt.zst", "checksum"}}) {
    std::ifstream f(dir / from, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(f)), {});
    const size_t at = bytes.size() - (from == "wiki.gzdata" ? 6 : 1);
    bytes[at] = static_cast<char>(bytes[at] ^ 0x5A);
    test::write_file(dir / to, bytes);
    expect_refused(dir / to, dir / "out", {dir / to, "corrupt", cause});
    std::ifstream again(dir / from, std::ios::binary);
    test::write_file(dir / ("tail-" + to), std::string((std::istreambuf_iterator<char>(again)), {}) + "trailing text\n");
  }
  expect_refused(dir / "tail-crc.txt.gz", dir / "out", {dir / "tail-crc.txt.gz", "corrupt gzip data", "header"});
  expect_refused(dir / "tail-sum.txt.zst", dir / "out", {dir / "tail-sum.txt.zst", "corrupt zstd data"});
  // A compressed file whose text is only blank lines.
  const auto g = test::run_command("printf '\\n \\n\\t\\n' | gzip > " + (dir / "blank.txt.gz"));
  ASSERT_EQ(g.status, 0) << g.output;
  expect_refused(dir / "blank.txt.gz", dir / "out", {dir / "blank.txt.gz", "no text"});
}

// The documents of a plain file read whole (stream_documents) are those of the pieces
// (read_piece / split_documents): CRLF, several \r, C1 controls at line ends, a byte-order
// mark, blank lines of spaces, in both document modes.
TEST(DataCorpusStream, StreamedDocumentsEqualSplitDocuments) {
  test::TempDir dir("stream-docs");
  std::ifstream src(test::wikitext_test_path(), std::ios::binary);
  std::string text = "\xEF\xBB\xBF";
  std::string line;
  const char* ends[] = {"\n", "\r\n", "\r\r\n", "\xC2\x85\n", " \n", "\n \t\n", "\n\n"};
  for (int i = 0; i < 3000 && std::getline(src, line); ++i) text += line + ends[i % 7];
  const std::string path = dir / "t.txt";
  test::write_file(path, text);
  for (const DocumentBoundary mode : {DocumentBoundary::kLine, DocumentBoundary::kBlankLine}) {
    std::vector<std::pair<int64_t, std::vector<std::string>>> want, got;
    for (const auto& d : split_documents(path, text, mode)) {
      want.push_back({d.begin, {}});
      for_each_line(text, d, [&](std::string_view l) { want.back().second.emplace_back(l); });
    }
    InputFile file{path, static_cast<int64_t>(text.size()), Compression::kNone, false};
    StreamOptions options;
    options.documents = mode;
    DocumentCallbacks cb;
    cb.begin = [&](int64_t offset) {
      got.push_back({offset, {}});
      return true;
    };
    cb.line = [&](std::string_view l) { got.back().second.emplace_back(l); };
    EXPECT_EQ(stream_documents(file, options, cb), static_cast<int64_t>(text.size()));
    ASSERT_GT(want.size(), 100u);
    EXPECT_TRUE(got == want) << to_string(mode) << ": " << got.size() << " documents streamed, " << want.size()
                             << " split";
  }
}

TEST(DataCorpusStream, MagicBytesAndNames) {
  test::TempDir dir("stream-magic");
  test::write_file(dir / "a.jsonl.gz", "plain text after all\n");
  EXPECT_EQ(detect_compression(dir / "a.jsonl.gz"), Compression::kNone);
  test::write_file(dir / "b.txt", std::string("\x28\xB5\x2F\xFD", 4) + "rest");
  EXPECT_EQ(detect_compression(dir / "b.txt"), Compression::kZstd);
  test::write_file(dir / "c", std::string("\x1F\x8B\x08", 3));
  EXPECT_EQ(detect_compression(dir / "c"), Compression::kGzip);
  EXPECT_TRUE(is_json_lines("x/c4-train.00001.json.gz", InputFormat::kAuto));
  EXPECT_TRUE(is_json_lines("pile.jsonl.zst", InputFormat::kAuto));
  EXPECT_TRUE(is_json_lines("a.ndjson", InputFormat::kAuto));
  EXPECT_FALSE(is_json_lines("wiki.txt.gz", InputFormat::kAuto));
  EXPECT_FALSE(is_json_lines("jsonl.txt", InputFormat::kAuto));
  EXPECT_TRUE(is_json_lines("wiki.txt", InputFormat::kJsonLines));
  EXPECT_FALSE(is_json_lines("a.jsonl", InputFormat::kText));
  std::string text, error;
  EXPECT_TRUE(json_record_text(R"({"meta": {"text": "no"}, "text": "caf\u00e9\nline 2", "n": null})", "text", text, error));
  EXPECT_EQ(text, "caf\xC3\xA9\nline 2");
  EXPECT_FALSE(json_record_text(R"({"text": true})", "text", text, error));
  EXPECT_EQ(error, "field \"text\" is a boolean, not a string");
  EXPECT_FALSE(json_record_text(R"({"text": {"a": 1}})", "text", text, error));
  EXPECT_EQ(error, "field \"text\" is an object, not a string");
  EXPECT_FALSE(json_record_text(R"({"text": "a"} trailing)", "text", text, error));
  EXPECT_EQ(error.rfind("invalid JSON (", 0), 0u) << error;
}

}  // namespace
}  // namespace tupe::data_pipeline
