// Verified reads (shard_format.h, version 3): CRC-32C against RFC 3720's vectors; every bit
// flip in a shard's token data detected by the on-demand (pread) and in-memory readers;
// flips in compressed shards either detected or harmless; damaged index entries; a rewrite
// in place with its modification time restored; version 2 shards read unverified and flagged
// once; a locked shard named as locked; the checksums as the file's identity; and the stored
// checksums against an independent Python CRC-32C.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "common/crc32c.h"
#include "common/log.h"
#include "data_pipeline/counter_rng.h"
#include "data_pipeline/hdf5_util.h"
#include "data_pipeline/shard_writer.h"
#include "data_test_util.h"
#include "shard_damage.h"
#include "shard_test_util.h"

namespace fs = std::filesystem;

namespace tupe::data_pipeline {
namespace {

using test::flip_bit;
using test::Layout;
using test::layout_of;
using test::make_version2;
using test::rewrite_in_place;
using test::write_shard;

ShardHeader header(int64_t vocab, int64_t shard_index, int64_t num_shards) {
  return test::shard_header(vocab, shard_index, num_shards, 'c', 64);
}

std::vector<std::vector<int32_t>> sequences(int64_t n, int64_t vocab, uint64_t seed) {
  return test::random_sequences(n, seed, 62, vocab > 200 ? 101 : 2, vocab > 200 ? 102 : 3, [vocab](CounterRng& rng) {
    return 5 + static_cast<int32_t>(rng.below(static_cast<uint64_t>(vocab - 5)));
  });
}

ShardHeader small_vocab_header(int64_t vocab, int64_t s, int64_t n) {
  ShardHeader h = header(vocab, s, n);
  if (vocab <= 200) h.special = SpecialTokens{0, 1, 2, 3, 4};
  return h;
}

DatasetOptions options(bool in_memory) {
  DatasetOptions o;
  o.in_memory = in_memory;
  return o;
}

/// The global sample holding token `token` of a shard whose samples are `seqs`.
int64_t sample_of_token(const std::vector<std::vector<int32_t>>& seqs, int64_t token) {
  int64_t at = 0;
  for (size_t i = 0; i < seqs.size(); ++i) {
    at += static_cast<int64_t>(seqs[i].size());
    if (token < at) return static_cast<int64_t>(i);
  }
  return -1;
}

TEST(DataChecksums, Crc32cMatchesRfc3720AndTheSoftwareLoop) {
  // RFC 3720 appendix B.4, and the customary "123456789" check value.
  unsigned char zeros[32] = {0}, ones[32], up[32], down[32];
  for (int i = 0; i < 32; ++i) {
    ones[i] = 0xff;
    up[i] = static_cast<unsigned char>(i);
    down[i] = static_cast<unsigned char>(31 - i);
  }
  for (auto* f : {&crc32c, &crc32c_software}) {
    EXPECT_EQ(f(0, zeros, 32), 0x8A9136AAu);
    EXPECT_EQ(f(0, ones, 32), 0x62A8AB43u);
    EXPECT_EQ(f(0, up, 32), 0x46DD794Eu);
    EXPECT_EQ(f(0, down, 32), 0x113FDB5Cu);
    EXPECT_EQ(f(0, "123456789", 9), 0xE3069283u);
    EXPECT_EQ(f(0, "", 0), 0u);
  }
  // Chained pieces equal the whole, at every split and alignment, by both paths.
  std::vector<unsigned char> data(300);
  CounterRng rng(5);
  for (auto& b : data) b = static_cast<unsigned char>(rng.below(256));
  for (size_t offset = 0; offset < 9; ++offset)
    for (size_t split = 0; split + offset <= data.size(); split += 7) {
      const uint32_t whole = crc32c_software(0, data.data() + offset, data.size() - offset);
      ASSERT_EQ(
          crc32c(crc32c(0, data.data() + offset, split), data.data() + offset + split, data.size() - offset - split),
          whole)
          << offset << " " << split;
    }
}

TEST(DataChecksums, ChecksumOfIdsEqualsTheChecksumOfTheStoredBytes) {
  const std::vector<int32_t> ids = {101, 7, 250, 30000, 102};
  for (const size_t width : {size_t{1}, size_t{2}, size_t{4}}) {
    std::vector<unsigned char> stored;
    for (const int32_t id : ids)
      for (size_t b = 0; b < width; ++b)
        stored.push_back(static_cast<unsigned char>(static_cast<uint32_t>(id) >> (8 * b)));
    EXPECT_EQ(sample_checksum_of_ids(3, ids.data(), 5, width), sample_checksum(5, 3, stored.data(), stored.size()));
    // The record: length as 4 bytes, candidates as 2, then the stored ids.
    std::vector<unsigned char> record = {5, 0, 0, 0, 3, 0};
    record.insert(record.end(), stored.begin(), stored.end());
    EXPECT_EQ(sample_checksum(5, 3, stored.data(), stored.size()), crc32c(0, record.data(), record.size()));
  }
}

TEST(DataChecksums, EveryBitFlipInTokenDataIsDetectedOnDemandAndInMemory) {
  test::TempDir dir("flips");
  const std::string path = dir / "train-00000-of-00001.h5";
  const auto seqs = sequences(400, 30522, 11);
  ShardWriterOptions opt;
  opt.chunk_tokens = 3000;  // several chunks: samples straddle chunk boundaries
  write_shard(path, header(30522, 0, 1), seqs, opt);
  const Layout tokens = layout_of(path, kTokenIdsDataset);
  ASSERT_GT(tokens.addresses.size(), 3u);
  CounterRng rng(99);
  int detected_on_demand = 0, detected_in_memory = 0;
  constexpr int kFlips = 100;
  for (int f = 0; f < kFlips; ++f) {
    const auto token = static_cast<int64_t>(rng.below(static_cast<uint64_t>(tokens.numel)));
    const int64_t offset = tokens.offset_of(token) + static_cast<int64_t>(rng.below(2));
    const int bit = static_cast<int>(rng.below(8));
    const int64_t sample = sample_of_token(seqs, token);
    SCOPED_TRACE("flip " + std::to_string(f) + ": byte " + std::to_string(offset) + " bit " + std::to_string(bit) +
                 ", sample " + std::to_string(sample));
    flip_bit(path, offset, bit);
    // On demand: the damaged sample fails, every other sample still reads as written.
    const auto ds = open_pretrain_dataset({path}, options(false));
    Sample s;
    for (int64_t i = 0; i < ds->size(); ++i) {
      if (i == sample) {
        try {
          ds->get(i, s);
          ADD_FAILURE() << "the damaged sample was served";
        } catch (const Error& e) {
          const std::string msg = e.what();
          EXPECT_NE(msg.find(path + ": sample " + std::to_string(sample) + " "), std::string::npos) << msg;
          EXPECT_NE(msg.find("checksum mismatch: the shard is damaged or was changed after preprocessing"),
                    std::string::npos)
              << msg;
          if (msg.find("checksum mismatch") != std::string::npos) ++detected_on_demand;
        }
        continue;
      }
      ds->get(i, s);
      ASSERT_EQ(s.token_ids, seqs[static_cast<size_t>(i)]) << i;
    }
    // In memory: refused at open, naming the same sample.
    try {
      open_pretrain_dataset({path}, options(true));
      ADD_FAILURE() << "in memory: the damaged shard was loaded";
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(path + ": sample " + std::to_string(sample) + " "), std::string::npos) << msg;
      if (msg.find("checksum mismatch") != std::string::npos) ++detected_in_memory;
    }
    flip_bit(path, offset, bit);  // restored
  }
  EXPECT_EQ(detected_on_demand, kFlips);
  EXPECT_EQ(detected_in_memory, kFlips);
  // Restored, the shard reads whole again.
  EXPECT_EQ(open_pretrain_dataset({path}, options(true))->size(), 400);
}

TEST(DataChecksums, BitFlipsInOneAndFourByteIdsAreDetected) {
  test::TempDir dir("flips-widths");
  for (const int64_t vocab : {int64_t{200}, int64_t{70000}}) {
    const std::string path = dir / ("train-" + std::to_string(vocab) + ".h5");
    const auto seqs = sequences(120, vocab, 12);
    write_shard(path, small_vocab_header(vocab, 0, 1), seqs);
    const Layout tokens = layout_of(path, kTokenIdsDataset);
    CounterRng rng(static_cast<uint64_t>(vocab));
    for (int f = 0; f < 10; ++f) {
      const auto token = static_cast<int64_t>(rng.below(static_cast<uint64_t>(tokens.numel)));
      const int64_t offset =
          tokens.offset_of(token) + static_cast<int64_t>(rng.below(static_cast<uint64_t>(tokens.element_bytes)));
      const int bit = static_cast<int>(rng.below(8));
      const std::string want = ": sample " + std::to_string(sample_of_token(seqs, token)) + " ";
      flip_bit(path, offset, bit);
      Sample s;
      const auto ds = open_pretrain_dataset({path}, options(false));
      test::expect_error([&] { ds->get(sample_of_token(seqs, token), s); }, {path + want, "checksum mismatch"});
      test::expect_error([&] { open_pretrain_dataset({path}, options(true)); }, {path + want, "checksum mismatch"});
      flip_bit(path, offset, bit);
    }
  }
}

TEST(DataChecksums, DamagedCompressedShardsNeverServeChangedSamples) {
  test::TempDir dir("flips-deflate");
  const std::string path = dir / "train-00000-of-00001.h5";
  const auto seqs = sequences(400, 30522, 13);
  ShardWriterOptions opt;
  opt.compression_level = 6;
  opt.chunk_tokens = 3000;
  write_shard(path, header(30522, 0, 1), seqs, opt);
  // The compressed chunks of token_ids as stored (address, bytes).
  std::vector<std::pair<int64_t, int64_t>> chunks;
  {
    h5::Lock lock;
    h5::Id file = h5::open_file_readonly(path);
    h5::Id ds(H5Dopen2(file.get(), kTokenIdsDataset, H5P_DEFAULT), H5Dclose);
    hsize_t n = 0;
    h5::Id space(H5Dget_space(ds.get()), H5Sclose);
    ASSERT_GE(H5Dget_num_chunks(ds.get(), space.get(), &n), 0);
    for (hsize_t k = 0; k < n; ++k) {
      haddr_t addr = 0;
      hsize_t bytes = 0;
      unsigned mask = 0;
      hsize_t coord[1] = {0};
      ASSERT_GE(H5Dget_chunk_info(ds.get(), space.get(), k, coord, &mask, &addr, &bytes), 0);
      chunks.emplace_back(static_cast<int64_t>(addr), static_cast<int64_t>(bytes));
    }
  }
  ASSERT_GT(chunks.size(), 3u);
  CounterRng rng(7);
  int errors = 0, harmless = 0;
  for (int f = 0; f < 100; ++f) {
    const auto& [addr, bytes] = chunks[rng.below(chunks.size())];
    const int64_t offset = addr + static_cast<int64_t>(rng.below(static_cast<uint64_t>(bytes)));
    const int bit = static_cast<int>(rng.below(8));
    flip_bit(path, offset, bit);
    for (const bool in_memory : {false, true}) {
      // Either a one-line error naming the file, or every sample exactly as written.
      try {
        const auto ds = open_pretrain_dataset({path}, options(in_memory));
        Sample s;
        for (int64_t i = 0; i < ds->size(); ++i) {
          ds->get(i, s);
          ASSERT_EQ(s.token_ids, seqs[static_cast<size_t>(i)]) << "flip " << f << " served changed sample " << i;
        }
        ++harmless;
      } catch (const Error& e) {
        const std::string msg = e.what();
        EXPECT_NE(msg.find(path), std::string::npos) << msg;
        EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
        ++errors;
      }
    }
    flip_bit(path, offset, bit);
  }
  EXPECT_EQ(errors + harmless, 200);
  EXPECT_GT(errors, 150) << "most flips of compressed data change it";
  RecordProperty("detected", errors);
  RecordProperty("harmless", harmless);
}

TEST(DataChecksums, DamagedIndexEntriesAreDetected) {
  test::TempDir dir("flips-index");
  const std::string path = dir / "train-00000-of-00001.h5";
  const auto seqs = sequences(300, 30522, 14);
  write_shard(path, header(30522, 0, 1), seqs);
  for (const char* name : {kOrdinaryCountsDataset, kSampleChecksumsDataset}) {
    SCOPED_TRACE(name);
    const Layout l = layout_of(path, name);
    for (const int64_t sample : {int64_t{0}, int64_t{137}, int64_t{299}}) {
      flip_bit(path, l.offset_of(sample), 0);  // the lowest bit: a count stays within its length
      Sample s;
      const auto ds = open_pretrain_dataset({path}, options(false));
      test::expect_error([&] { ds->get(sample, s); },
                         {path + ": sample " + std::to_string(sample) + " ", "checksum mismatch"});
      if (sample != 299) {
        ds->get(sample + 1, s);
        EXPECT_EQ(s.token_ids, seqs[static_cast<size_t>(sample) + 1]);
      }
      test::expect_error([&] { open_pretrain_dataset({path}, options(true)); }, {path, "checksum mismatch"});
      flip_bit(path, l.offset_of(sample), 0);
    }
  }
}

TEST(DataChecksums, RewriteInPlaceWithTheModificationTimeRestoredIsRefused) {
  test::TempDir dir("rewrite");
  const std::string path = dir / "train-00000-of-00001.h5";
  const auto seqs = sequences(300, 30522, 15);
  write_shard(path, header(30522, 0, 1), seqs);
  struct stat before {};
  ASSERT_EQ(::stat(path.c_str(), &before), 0);
  // Other ids (still inside the vocabulary) over tokens 500..899, size and mtime restored.
  auto rewrite = [&] { rewrite_in_place(path, 500, 400, before); };
  // While open: the change time gives it away at the next read, whichever sample.
  const auto ds = open_pretrain_dataset({path}, options(false));
  Sample s;
  ds->get(0, s);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // past the file system's time granularity
  rewrite();
  test::expect_error([&] { ds->get(0, s); }, {path, "changed since it was opened", "change time"});
  // Opened after the rewrite: the rewritten samples fail their checksums, the others read.
  const auto again = open_pretrain_dataset({path}, options(false));
  const int64_t first = sample_of_token(seqs, 500);
  test::expect_error([&] { again->get(first, s); },
                     {path + ": sample " + std::to_string(first) + " ", "checksum mismatch"});
  again->get(0, s);
  EXPECT_EQ(s.token_ids, seqs[0]);
}

TEST(DataChecksums, Version2ShardsAreReadUnverifiedAndFlaggedOncePerDataSet) {
  test::TempDir dir("version2");
  const auto a = sequences(50, 30522, 16), b = sequences(40, 30522, 17);
  const std::string p0 = dir / "train-00000-of-00002.h5", p1 = dir / "train-00001-of-00002.h5";
  write_shard(p0, header(30522, 0, 2), a);
  write_shard(p1, header(30522, 1, 2), b);
  std::ostringstream out, err;
  log::redirect_for_test(&out, &err);
  auto count = [](const std::string& text, const std::string& what) {
    size_t n = 0;
    for (size_t pos = text.find(what); pos != std::string::npos; pos = text.find(what, pos + 1)) ++n;
    return n;
  };
  // Version 3: verified, nothing said.
  open_pretrain_dataset({dir.str()}, options(false));
  EXPECT_EQ(err.str(), "");
  make_version2(p0);
  for (const bool in_memory : {false, true}) {
    err.str("");
    const auto ds = open_pretrain_dataset({dir.str()}, options(in_memory));
    EXPECT_EQ(count(err.str(), "\n"), 1u) << err.str();
    EXPECT_EQ(count(err.str(), "read unverified"), 1u) << err.str();
    EXPECT_NE(err.str().find("train data: 1 of 2 shards (first " + p0 + ") are of format version 2"), std::string::npos)
        << err.str();
    Sample s;
    for (int64_t i = 0; i < ds->size(); ++i) {
      ds->get(i, s);
      ASSERT_EQ(s.token_ids, i < 50 ? a[static_cast<size_t>(i)] : b[static_cast<size_t>(i - 50)]);
    }
    EXPECT_EQ(ds->info().shards[0].checksums_hash, 0u);
    EXPECT_NE(ds->info().shards[1].checksums_hash, 0u);
  }
  make_version2(p1);
  err.str("");
  open_pretrain_dataset({dir.str()}, options(false));
  EXPECT_EQ(count(err.str(), "\n"), 1u) << err.str();
  EXPECT_NE(err.str().find("2 of 2 shards"), std::string::npos) << err.str();
  // A damaged version 2 shard is still read (it has nothing to check against): what
  // version 3 adds.
  const Layout tokens = layout_of(p0, kTokenIdsDataset);
  flip_bit(p0, tokens.offset_of(1), 1);  // sample 0's first ordinary id, +-2
  Sample s;
  open_pretrain_dataset({dir.str()}, options(false))->get(0, s);
  EXPECT_NE(s.token_ids, a[0]);
  log::redirect_for_test(nullptr, nullptr);
}

TEST(DataChecksums, ChecksumsTellApartShardsWithTheSameLengths) {
  test::TempDir dir("identity");
  auto seqs = sequences(30, 30522, 18);
  fs::create_directories(dir / "a");
  fs::create_directories(dir / "b");
  write_shard(dir / "a/train-00000-of-00001.h5", header(30522, 0, 1), seqs);
  seqs[7][1] = seqs[7][1] == 5000 ? 5001 : 5000;  // one id differs, lengths and candidate counts the same
  write_shard(dir / "b/train-00000-of-00001.h5", header(30522, 0, 1), seqs);
  for (const bool in_memory : {false, true}) {
    const auto a = open_pretrain_dataset({dir / "a"}, options(in_memory));
    const auto b = open_pretrain_dataset({dir / "b"}, options(in_memory));
    EXPECT_EQ(a->info().shards[0].index_hash, b->info().shards[0].index_hash);
    EXPECT_NE(a->info().shards[0].checksums_hash, b->info().shards[0].checksums_hash);
    const auto da = describe_shards(a->info(), "train"), db = describe_shards(b->info(), "train");
    EXPECT_NE(da.back().second, db.back().second);
    EXPECT_NE(da.back().second.find(", checksums hash "), std::string::npos) << da.back().second;
  }
  // The two readers agree on the identity.
  EXPECT_EQ(open_pretrain_dataset({dir / "a"}, options(true))->info().shards[0].checksums_hash,
            open_pretrain_dataset({dir / "a"}, options(false))->info().shards[0].checksums_hash);
}

TEST(DataChecksums, ALockedShardIsNamedAsLocked) {
  test::TempDir dir("locked");
  const std::string path = dir / "train-00000-of-00001.h5";
  write_shard(path, header(30522, 0, 1), sequences(20, 30522, 19));
  // An exclusive flock on another open file description, as `flock -x` or an HDF5 writer holds.
  const int fd = ::open(path.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX), 0);
  for (const bool in_memory : {false, true})
    test::expect_error([&] { open_pretrain_dataset({path}, options(in_memory)); },
                       {path, "locked by another process", "HDF5_USE_FILE_LOCKING=FALSE"});
  ::close(fd);
  EXPECT_EQ(open_pretrain_dataset({path}, options(false))->size(), 20);
}

TEST(DataChecksums, StoredChecksumsAgreeWithAnIndependentPythonCrc32c) {
  test::TempDir dir("python-crc");
  for (const int64_t vocab : {int64_t{200}, int64_t{30522}, int64_t{70000}}) {
    const std::string path = dir / ("train-" + std::to_string(vocab) + ".h5");
    write_shard(path, small_vocab_header(vocab, 0, 1), sequences(150, vocab, 20));
    const auto r =
        test::run_command(test::python() + " " + test::test_source_dir() + "/shard_files.py checksums " + path);
    ASSERT_EQ(r.status, 0) << r.output;
    const auto j = nlohmann::json::parse(r.output);
    EXPECT_EQ(j["check_vector"], 0xE3069283u);
    EXPECT_EQ(j["samples"], 150);
    EXPECT_EQ(j["matching"], 150) << r.output;
  }
}

}  // namespace
}  // namespace tupe::data_pipeline
