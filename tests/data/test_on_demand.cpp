// On-demand shard reading (data_pipeline/on_demand.h): every sample and per-sample fact equals
// the in-memory reader's (the reference) for unfiltered, compressed and version-1 own shards
// and int32/int64 NVIDIA shards; the block cache under a tiny bound; shards changed or
// truncated after open; and the streaming piece reader against whole-file splitting.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "data_pipeline/corpus.h"
#include "data_pipeline/counter_rng.h"
#include "data_pipeline/loader.h"
#include "data_pipeline/shard_writer.h"
#include "data_test_util.h"
#include "shard_test_util.h"

namespace fs = std::filesystem;

namespace tupe::data_pipeline {
namespace {

constexpr int64_t kVocab = 30522;

ShardHeader header(int64_t shard_index, int64_t num_shards) {
  return test::shard_header(kVocab, shard_index, num_shards, 'b', 64);
}

/// [CLS] x... [SEP] with some [UNK]/[MASK] inside, so the candidate counts vary.
std::vector<std::vector<int32_t>> sequences(int64_t n, uint64_t seed) {
  return test::random_sequences(n, seed, 62, 101, 102, [](CounterRng& rng) {
    return rng.below(10) == 0 ? (rng.below(2) ? 100 : 103) : 999 + static_cast<int32_t>(rng.below(kVocab - 999));
  });
}

void write_set(const std::string& dir, const std::vector<std::vector<std::vector<int32_t>>>& shards,
               const ShardWriterOptions& opt) {
  fs::create_directories(dir);
  const auto n = static_cast<int64_t>(shards.size());
  for (int64_t s = 0; s < n; ++s)
    test::write_shard(dir + "/" + shard_file_name("train", s, n), header(s, n), shards[static_cast<size_t>(s)], opt);
}

std::vector<int64_t> shuffled(int64_t n, uint64_t seed) {
  std::vector<int64_t> order(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) order[static_cast<size_t>(i)] = i;
  CounterRng rng(seed);
  for (int64_t i = n - 1; i > 0; --i)
    std::swap(order[static_cast<size_t>(i)], order[rng.below(static_cast<uint64_t>(i) + 1)]);
  return order;
}

DatasetOptions options(bool in_memory, int64_t cache_bytes = int64_t{128} << 20) {
  DatasetOptions o;
  o.vocab_size = kVocab;
  o.in_memory = in_memory;
  o.cache_bytes = cache_bytes;
  return o;
}

/// Every sample and per-sample fact of `got` (read in `order`) equals `want`'s.
void expect_same(const PretrainDataset& got, const PretrainDataset& want, const std::vector<int64_t>& order) {
  ASSERT_EQ(got.size(), want.size());
  EXPECT_EQ(got.info().format, want.info().format);
  EXPECT_EQ(got.info().max_seq_len, want.info().max_seq_len);
  EXPECT_EQ(got.info().has_static_masks, want.info().has_static_masks);
  ASSERT_EQ(got.info().shards.size(), want.info().shards.size());
  for (size_t f = 0; f < got.info().shards.size(); ++f) {
    EXPECT_EQ(got.info().shards[f].sequences, want.info().shards[f].sequences);
    EXPECT_EQ(got.info().shards[f].tokens, want.info().shards[f].tokens);
    EXPECT_EQ(got.info().shards[f].index_hash, want.info().shards[f].index_hash);
  }
  Sample a, b;
  for (const int64_t i : order) {
    got.get(i, a);
    want.get(i, b);
    ASSERT_EQ(a.token_ids, b.token_ids) << i;
    ASSERT_EQ(a.segment_ids, b.segment_ids) << i;
    ASSERT_EQ(a.masked_positions, b.masked_positions) << i;
    ASSERT_EQ(a.masked_labels, b.masked_labels) << i;
    ASSERT_EQ(a.next_sentence_label, b.next_sentence_label) << i;
    ASSERT_EQ(got.length(i), want.length(i)) << i;
    ASSERT_EQ(got.ordinary_tokens(i), want.ordinary_tokens(i)) << i;
    ASSERT_EQ(got.static_mask_count(i), want.static_mask_count(i)) << i;
  }
}

std::string shard_tool(const std::string& args) {
  return test::python() + " " + test::test_source_dir() + "/shard_files.py " + args;
}

TEST(DataOnDemand, OwnShardsUnfilteredCompressedAndVersion1MatchTheInMemoryReader) {
  test::TempDir dir("ondemand-own");
  const std::vector<std::vector<std::vector<int32_t>>> data = {sequences(900, 1), sequences(500, 2)};
  int64_t tokens = 0;
  for (const auto& shard : data)
    for (const auto& q : shard) tokens += static_cast<int64_t>(q.size());
  write_set(dir / "plain", data, ShardWriterOptions{});
  // Small chunks, so that samples straddle chunk (block) boundaries.
  write_set(dir / "gzip", data, ShardWriterOptions{4, 1000, 64});
  write_set(dir / "plain_chunks", data, ShardWriterOptions{0, 1000, 64});
  for (const char* set : {"plain", "gzip"}) {
    fs::create_directories(dir / (std::string("v1_") + set));
    for (int s = 0; s < 2; ++s) {
      const std::string name = shard_file_name("train", s, 2);
      const auto r = test::run_command(shard_tool("version1 " + (dir / set) + "/" + name + " " + (dir / "v1_") + set +
                                                  "/" + name));
      ASSERT_EQ(r.status, 0) << r.output;
    }
  }
  for (const char* set : {"plain", "plain_chunks", "gzip", "v1_plain", "v1_gzip"}) {
    SCOPED_TRACE(set);
    const auto want = open_pretrain_dataset({dir / set}, options(true));
    const auto got = open_pretrain_dataset({dir / set}, options(false));
    // Open read the index only: no token bytes, no block.
    EXPECT_EQ(got->read_stats().bytes_read, 0);
    EXPECT_EQ(got->read_stats().block_loads, 0);
    EXPECT_GT(got->read_stats().index_bytes, 0);
    EXPECT_LT(got->read_stats().index_bytes, 1400 * 10 + 4096) << "about 8 bytes a sample (4 of them its checksum)";
    const std::vector<int64_t> order = shuffled(got->size(), 7);
    const int64_t outside[2] = {-1, got->size()};
    got->prefetch(outside, 2);  // a hint: out-of-range indices are left to get() to name
    got->prefetch(order.data(), static_cast<int64_t>(order.size()));
    EXPECT_EQ(got->read_stats().bytes_read, 0) << "a hint reads nothing itself";
    expect_same(*got, *want, order);
    const ReadStats st = got->read_stats();
    if (std::string(set).find("gzip") == std::string::npos) {
      EXPECT_EQ(st.bytes_read, tokens * 2) << "uint16 ids, each sample read once by pread";
      EXPECT_EQ(st.block_loads, 0);
    } else {
      EXPECT_EQ(st.bytes_read, 0);
      EXPECT_GT(st.block_loads, 0);
    }
  }
}

TEST(DataOnDemand, NvidiaInt32Int64AndManyBlockShardsMatchTheInMemoryReader) {
  test::TempDir dir("ondemand-nvidia");
  auto r = test::run_command(shard_tool("nvidia " + dir.str()));
  ASSERT_EQ(r.status, 0) << r.output;
  r = test::run_command(shard_tool("nvidia_big " + dir.str() + " 20000"));
  ASSERT_EQ(r.status, 0) << r.output;
  for (const char* name : {"nv_int32_training_0.hdf5", "nv_int64_training_0.hdf5", "nv_big_training_0.hdf5"}) {
    SCOPED_TRACE(name);
    const auto want = open_pretrain_dataset({dir / name}, options(true));
    const auto got = open_pretrain_dataset({dir / name}, options(false));
    EXPECT_EQ(got->read_stats().block_loads, 0);
    expect_same(*got, *want, shuffled(got->size(), 3));
  }
}

TEST(DataOnDemand, TinyCacheEvictsAndStillReadsExactlyFromSeveralThreads) {
  test::TempDir dir("ondemand-cache");
  write_set(dir / "gzip", {sequences(2000, 5)}, ShardWriterOptions{4, 1000, 64});
  const auto r = test::run_command(shard_tool("nvidia_big " + dir.str() + " 4000"));
  ASSERT_EQ(r.status, 0) << r.output;
  for (const std::string& path : {dir / "gzip", dir / "nv_big_training_0.hdf5"}) {
    SCOPED_TRACE(path);
    const auto want = open_pretrain_dataset({path}, options(true));
    const auto roomy = open_pretrain_dataset({path}, options(false));
    const auto tiny = open_pretrain_dataset({path}, options(false, 1));
    expect_same(*roomy, *want, shuffled(want->size(), 1));
    // Three threads read disjoint parts of one random order at once through the tiny cache.
    const std::vector<int64_t> order = shuffled(want->size(), 2);
    std::vector<std::thread> threads;
    for (int t = 0; t < 3; ++t)
      threads.emplace_back([&, t] {
        std::vector<int64_t> part;
        for (size_t k = static_cast<size_t>(t); k < order.size(); k += 3) part.push_back(order[k]);
        expect_same(*tiny, *want, part);
      });
    for (auto& th : threads) th.join();
    const ReadStats big = roomy->read_stats(), small = tiny->read_stats();
    EXPECT_EQ(big.evictions, 0);
    EXPECT_GE(big.block_loads, 3) << "several blocks";
    EXPECT_GT(small.block_loads, big.block_loads) << "evicted blocks are loaded again";
    EXPECT_GT(small.evictions, 0);
    // The roomy cache loaded every block once: its peak is the whole shard; the tiny one
    // keeps one block (the bound is below any block).
    EXPECT_LE(small.peak_cached_bytes, 2 * big.peak_cached_bytes / big.block_loads) << "about one block";
    EXPECT_LE(small.cached_bytes, small.peak_cached_bytes);
  }
}

void expect_read_fails(const PretrainDataset& ds, int64_t index, std::initializer_list<std::string> fragments) {
  Sample s;
  test::expect_error([&] { ds.get(index, s); }, fragments);
}

TEST(DataOnDemand, ShardChangedOrTruncatedAfterOpenIsAOneLineError) {
  test::TempDir dir("ondemand-changed");
  const auto seqs = sequences(3000, 9);
  write_set(dir / "plain", {seqs}, ShardWriterOptions{});
  write_set(dir / "gzip", {seqs}, ShardWriterOptions{4, 1000, 64});
  const std::string name = shard_file_name("train", 0, 1);
  // Truncated under an open dataset: the unfiltered reader (pread) and the cached one.
  for (const char* set : {"plain", "gzip"}) {
    SCOPED_TRACE(set);
    const std::string path = (dir / set) + "/" + name;
    const auto ds = open_pretrain_dataset({dir / set}, options(false, 1));
    const auto size = fs::file_size(path);
    fs::resize_file(path, size / 2);
    expect_read_fails(*ds, ds->size() - 1, {path, "changed since it was opened", "size"});
    expect_read_fails(*ds, 0, {path, "changed since it was opened"});
    // Through the loader: its worker's error reaches next(), with the file named.
    DataOptions lc;
    lc.global_batch_size = 8;
    lc.num_threads = 1;
    Loader loader(ds, lc, 0, 1);
    try {
      loader.next();
      ADD_FAILURE() << "expected an error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    }
  }
  // Rewritten in place with the same size (a newer modification time).
  write_set(dir / "again", {seqs}, ShardWriterOptions{});
  const std::string path = (dir / "again") + "/" + name;
  const auto ds = open_pretrain_dataset({dir / "again"}, options(false));
  Sample s;
  ds->get(5, s);
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  test::write_file(path, bytes);
  fs::last_write_time(path, fs::last_write_time(path) + std::chrono::seconds(5));
  expect_read_fails(*ds, 5, {path, "changed since it was opened", "modified in place"});
  // An NVIDIA shard truncated after open.
  const auto r = test::run_command(shard_tool("nvidia_big " + dir.str() + " 2000"));
  ASSERT_EQ(r.status, 0) << r.output;
  const std::string nv = dir / "nv_big_training_0.hdf5";
  const auto nds = open_pretrain_dataset({nv}, options(false, 1));
  fs::resize_file(nv, fs::file_size(nv) / 2);
  expect_read_fails(*nds, 1999, {nv, "changed since it was opened"});
}

// ---- Streaming preprocessing: pieces read alone find the whole file's documents ----------

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

/// Random text with the awkward cases: CRLF, blank runs, lines of spaces / C1 controls, a
/// long document, multi-byte characters, no final newline.
std::string awkward_text(uint64_t seed) {
  CounterRng rng(seed);
  std::string t = "\xEF\xBB\xBF";
  const char* pieces[] = {"word", " ", "\xC3\xA9", "\xE4\xB8\xAD", "\t", "\xC2\x85", "x"};
  for (int line = 0; line < 600; ++line) {
    const uint64_t kind = rng.below(10);
    if (kind == 0) {
      t += "\r\n";
    } else if (kind == 1) {
      t += "  \xC2\x85 \n";  // blank: spaces and a C1 control
    } else {
      const uint64_t n = line == 300 ? 3000 : rng.below(60);  // one very long line
      for (uint64_t k = 0; k < n; ++k) t += pieces[rng.below(7)];
      t += rng.below(3) == 0 ? "\r\n" : "\n";
    }
  }
  t += "last line without a newline";
  return t;
}

void expect_pieces_find_whole_file_documents(const std::string& path, int64_t piece_bytes, DocumentBoundary mode) {
  const std::string bytes = read_all(path);
  const auto size = static_cast<int64_t>(bytes.size());
  const std::vector<DocumentSpan> whole = split_documents(path, bytes, mode);
  int64_t longest = 0;
  for (const DocumentSpan& d : whole) longest = std::max(longest, d.end - d.begin);
  std::vector<DocumentSpan> joined;
  for (int64_t b = 0; b < size; b += piece_bytes) {
    const PieceText piece = read_piece(path, size, b, std::min(size, b + piece_bytes), mode);
    for (const DocumentSpan& d : piece.docs) {
      const DocumentSpan abs{piece.base + d.begin, piece.base + d.end};
      ASSERT_GE(abs.begin, b) << "a document starts in its piece";
      ASSERT_LT(abs.begin, b + piece_bytes);
      ASSERT_EQ(piece.bytes.substr(static_cast<size_t>(d.begin), static_cast<size_t>(d.end - d.begin)),
                bytes.substr(static_cast<size_t>(abs.begin), static_cast<size_t>(abs.end - abs.begin)));
      joined.push_back(abs);
    }
    EXPECT_LE(static_cast<int64_t>(piece.bytes.size()), piece_bytes + longest + 70000)
        << "bounded: the piece, the tail of its last document and one read block";
  }
  ASSERT_EQ(joined.size(), whole.size()) << "piece_bytes " << piece_bytes;
  for (size_t k = 0; k < whole.size(); ++k) {
    EXPECT_EQ(joined[k].begin, whole[k].begin) << k;
    EXPECT_EQ(joined[k].end, whole[k].end) << k;
  }
}

TEST(DataCorpus, PiecesReadAloneFindTheWholeFilesDocuments) {
  test::TempDir dir("pieces");
  for (uint64_t seed : {1, 2}) {
    const std::string path = dir / ("awkward" + std::to_string(seed) + ".txt");
    test::write_file(path, awkward_text(seed));
    for (const DocumentBoundary mode : {DocumentBoundary::kBlankLine, DocumentBoundary::kLine})
      for (const int64_t piece : {7, 64, 1000, 1024, 4099})
        expect_pieces_find_whole_file_documents(path, piece, mode);
  }
  // Real text: WikiText-2 (test split) in both modes.
  for (const DocumentBoundary mode : {DocumentBoundary::kBlankLine, DocumentBoundary::kLine})
    for (const int64_t piece : {1024, 65536, 1 << 20})
      expect_pieces_find_whole_file_documents(test::wikitext_test_path(), piece, mode);
}

TEST(DataCorpus, PieceErrorsNameTheFileOffsetAndBlankFilesHaveNoText) {
  test::TempDir dir("piece-errors");
  std::string text;
  for (int i = 0; i < 100; ++i) text += "line number " + std::to_string(1000 + i) + " of the text\n";  // 29 bytes
  text[2001] = static_cast<char>(0xFF);
  const std::string path = dir / "bad.txt";
  test::write_file(path, text);
  const auto size = static_cast<int64_t>(text.size());
  int failures = 0;
  for (int64_t b = 0; b < size; b += 1024) {
    try {
      read_piece(path, size, b, std::min(size, b + 1024), DocumentBoundary::kLine);
    } catch (const Error& e) {
      ++failures;
      EXPECT_NE(std::string(e.what()).find(path + ": invalid UTF-8 at byte 2001"), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(failures, 1) << "exactly the piece holding the line checks it";
  const std::string blank = dir / "blank.txt";
  test::write_file(blank, std::string(100000, '\n') + " \t\r\n");
  EXPECT_FALSE(file_has_text(blank, static_cast<int64_t>(fs::file_size(blank))));
  const std::string late = dir / "late.txt";
  test::write_file(late, std::string(100000, '\n') + "text at the end");
  EXPECT_TRUE(file_has_text(late, static_cast<int64_t>(fs::file_size(late))));
}

}  // namespace
}  // namespace tupe::data_pipeline
