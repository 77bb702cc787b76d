// Parquet and Arrow IPC inputs of `tupe preprocess` (data_pipeline/columnar_source.h), built
// by make_columnar_inputs.py with pyarrow and `datasets` from real text (WikiText-2 articles and
// mixed-english documents; row groups of 40 rows, three null texts, extra columns): their
// sequences are those of the JSON-lines export of the same rows (written by the script with
// json.dumps), the nulls are counted as pyarrow counts them, and every bad input is one line
// naming the file and the row group or row, with no shard left behind.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "data_pipeline/columnar_source.h"
#include "data_pipeline/dataset.h"
#include "data_test_util.h"

namespace fs = std::filesystem;

namespace tupe::data_pipeline {
namespace {

/// make_columnar_inputs.py into `dir`; returns its facts (corpus.json).
nlohmann::json make_inputs(const test::TempDir& dir, int rows_per_group = 40) {
  const auto r = test::run_command(
      test::python() + " " + test::test_source_dir() + "/make_columnar_inputs.py " + test::wikitext_test_path() + " " +
      test::shared_data() + "/text/mixed-english/validation.txt " + dir.str() + " " + std::to_string(rows_per_group));
  EXPECT_EQ(r.status, 0) << r.output;
  std::ifstream in(dir / "corpus.json");
  return nlohmann::json::parse(in);
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

struct Output {
  test::CommandResult result;
  std::vector<std::vector<int32_t>> train, validation;
};

Output run(const std::string& input, const std::string& out, const std::string& args, bool validation = false) {
  Output r;
  r.result = test::run_preprocess_quietly("--overwrite --input " + input + " --output " + out + " " + args);
  EXPECT_EQ(r.result.status, 0) << input << ":\n" << r.result.output;
  if (r.result.status != 0) return r;
  r.train = sequences(out, "train");
  if (validation) r.validation = sequences(out, "validation");
  return r;
}

TEST(DataColumnar, ParquetArrowAndDatasetsGiveTheSequencesOfTheJsonLinesExport) {
  test::TempDir dir("columnar-same");
  const auto facts = make_inputs(dir);
  ASSERT_GE(facts["row_groups"].get<int>(), 9);
  // One document per row, packed alone (packing = document): the sequences do not depend on
  // where the pieces of the JSON lines are cut, nor on the row groups.
  const std::string args =
      "--preprocess.packing document --preprocess.validation_ratio 0 --preprocess.piece_bytes 65536";
  const Output ref = run(dir / "corpus.jsonl", dir / "out-jsonl", args);
  ASSERT_GT(ref.train.size(), 300u);
  const std::string nulls =
      "skipped " + std::to_string(facts["null_count"].get<int>()) + " null values of column \"text\"";
  for (const char* input : {"corpus.parquet", "corpus.arrows", "corpus.feather", "corpus-ds"}) {
    const Output r = run(dir / input, dir / (std::string("out-") + input), args);
    EXPECT_TRUE(r.train == ref.train) << input << ": " << r.train.size() << " sequences, the JSON lines "
                                      << ref.train.size();
    EXPECT_NE(r.result.output.find(nulls), std::string::npos) << input << ": '" << nulls << "' not in\n"
                                                              << r.result.output;
  }
  // The first null (row 5, in row group 0) is named in a warning.
  const Output p = run(dir / "corpus.parquet", dir / "out-warn", args + " --log-level warn");
  EXPECT_NE(p.result.output.find("corpus.parquet: row group 0, row 5 (row 5 of the file): null in column \"text\""),
            std::string::npos)
      << p.result.output;
}

TEST(DataColumnar, FullSentencesAndAValidationShareAcrossFormats) {
  test::TempDir dir("columnar-full");
  make_inputs(dir);
  // Parquet row groups and Arrow record batches of the same 40 rows are the same pieces,
  // with the same train/validation draw: identical shards, packed across documents.
  const std::string many =
      "--preprocess.num_shards 3 --preprocess.num_validation_shards 2 "
      "--preprocess.validation_ratio 0.1 --preprocess.seed 11";
  const Output ref = run(dir / "corpus.parquet", dir / "out-parquet", many, true);
  EXPECT_GT(ref.train.size(), 300u);
  EXPECT_GT(ref.validation.size(), 10u);
  for (const char* input : {"corpus.arrows", "corpus.feather"}) {
    const Output r = run(dir / input, dir / (std::string("out-") + input), many, true);
    EXPECT_TRUE(r.train == ref.train) << input;
    EXPECT_TRUE(r.validation == ref.validation) << input;
  }
  // One row group holding every row against the JSON lines read as one piece: FULL-SENTENCES
  // packing across documents gives the same sequences.
  test::TempDir one("columnar-one");
  make_inputs(one, 100000);
  const std::string whole = "--preprocess.validation_ratio 0 --preprocess.piece_bytes 100000000";
  const Output j = run(one / "corpus.jsonl", one / "out-jsonl", whole);
  const Output q = run(one / "corpus.parquet", one / "out-parquet", whole);
  EXPECT_GT(j.train.size(), 300u);
  EXPECT_TRUE(q.train == j.train) << q.train.size() << " vs " << j.train.size();
}

/// Exit status 1 and one error line holding every fragment; no shard in `out`.
void expect_refused(const std::string& input, const std::string& out, std::initializer_list<std::string> fragments,
                    const std::string& args = "") {
  const auto r =
      test::run_preprocess_quietly("--input " + input + " --output " + out + " --preprocess.num_shards 3 " + args);
  EXPECT_EQ(r.status, 1) << r.output;
  const std::string last = test::one_error_line(r.output);
  for (const auto& f : fragments) EXPECT_NE(last.find(f), std::string::npos) << "'" << f << "' not in: " << last;
  EXPECT_FALSE(fs::exists(out)) << out << " left behind by a failed run";
}

TEST(DataColumnar, BadInputsAreOneLineNamingTheFileAndTheRowGroup) {
  test::TempDir dir("columnar-bad");
  const auto facts = make_inputs(dir);
  const std::string out = dir / "out";
  expect_refused(dir / "bad-missing.parquet", out,
                 {dir / "bad-missing.parquet", "no column \"text\"", "its columns: id, url, title, body"});
  expect_refused(dir / "bad-int.parquet", out, {dir / "bad-int.parquet", "column \"text\" is int64, not a string"});
  expect_refused(dir / "bad-binary.parquet", out, {"column \"text\" is binary, not a string"});
  expect_refused(dir / "corpus-ds", out, {"data-00000-of-00002.arrow", "column \"id\" is int64, not a string"},
                 "--preprocess.text_field id");
  expect_refused(dir / "corpus.arrows", out, {dir / "corpus.arrows", "column \"id\" is int64"},
                 "--preprocess.text_field id");
  // Damage found while the shards are written (row groups 2 and 3 of 10; other shards are
  // being written then): the temporary files go too.
  const auto& u = facts["bad_utf8"];
  expect_refused(
      dir / "bad-utf8.parquet", out,
      {dir / "bad-utf8.parquet",
       "row group " + std::to_string(u["row_group"].get<int>()) + ", row " + std::to_string(u["row"].get<int>()) +
           " (row " + std::to_string(u["file_row"].get<int>()) + " of the file)",
       "invalid UTF-8 at byte 3 of its text"});
  expect_refused(dir / "bad-page.parquet", out,
                 {dir / "bad-page.parquet", "row group 3: cannot read column \"text\"", "CRC"});
  expect_refused(dir / "bad-cut.parquet", out, {dir / "bad-cut.parquet", "not a readable Parquet file"});
  expect_refused(dir / "bad-cut.arrows", out, {dir / "bad-cut.arrows", ": byte ", "damaged Arrow IPC stream"});
  expect_refused(dir / "bad-dict", out, {dir / "bad-dict", "DatasetDict folder", "name one of its splits"});
  // A file that is named .parquet but holds text is text (magic bytes decide).
  test::write_file(dir / "text.parquet", "plain text, not Parquet\n");
  EXPECT_EQ(detect_columnar(dir / "text.parquet", "plain te"), Columnar::kNone);
  EXPECT_EQ(detect_columnar("x", std::string("PAR1\x15\x04", 6)), Columnar::kParquet);
  EXPECT_EQ(detect_columnar("x", "ARROW1\0\0"), Columnar::kArrowFile);
  EXPECT_EQ(detect_columnar("x", std::string("\xFF\xFF\xFF\xFF\x10\x01\0\0", 8)), Columnar::kArrowStream);
  test::expect_error([] { detect_columnar("enc.parquet", "PARE...."); }, {"enc.parquet", "encrypted footer"});
}

}  // namespace
}  // namespace tupe::data_pipeline
