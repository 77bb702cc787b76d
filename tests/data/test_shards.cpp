// Shard writer and readers: our format round trip (layout checked with h5py), NVIDIA shards
// written by h5py (int32 and int64), and every kind of bad file.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "data_pipeline/counter_rng.h"
#include "data_pipeline/hdf5_util.h"
#include "data_pipeline/loader.h"
#include "data_pipeline/shard_writer.h"
#include "data_test_util.h"
#include "shard_test_util.h"

namespace tupe::data_pipeline {
namespace {

const std::string kSha(64, 'a');

ShardHeader header(int64_t vocab, int64_t shard_index, int64_t num_shards) {
  ShardHeader h = test::shard_header(vocab, shard_index, num_shards, kSha.front(), 32);
  h.seed = 3;
  return h;
}

std::vector<std::vector<int32_t>> sequences(int64_t n, int64_t vocab, uint64_t seed) {
  return test::random_sequences(n, seed, 30, 101, 102, [vocab](CounterRng& rng) {
    return 110 + static_cast<int32_t>(rng.below(static_cast<uint64_t>(vocab - 110)));
  });
}

using test::write_shard;

nlohmann::json inspect(const std::string& path) {
  const auto r = test::run_command(test::python() + " " + test::test_source_dir() + "/shard_files.py inspect " + path);
  EXPECT_EQ(r.status, 0) << r.output;
  return nlohmann::json::parse(r.output);
}

TEST(DataShards, RoundTripAndLayoutSeenByH5py) {
  test::TempDir dir("roundtrip");
  const auto a = sequences(700, 30522, 1), b = sequences(300, 30522, 2);
  write_shard(dir / "train-00000-of-00002.h5", header(30522, 0, 2), a);
  write_shard(dir / "train-00001-of-00002.h5", header(30522, 1, 2), b);
  DatasetOptions opt;
  opt.expected_vocab_sha256 = kSha;
  const auto ds = open_pretrain_dataset({dir.str()}, opt);
  ASSERT_EQ(ds->size(), 1000);
  EXPECT_EQ(ds->info().format, "tupe");
  EXPECT_EQ(ds->info().max_seq_len, 32);
  EXPECT_EQ(ds->info().vocab_sha256, kSha);
  Sample s;
  for (int64_t i = 0; i < 1000; ++i) {
    ds->get(i, s);
    const auto& want = i < 700 ? a[static_cast<size_t>(i)] : b[static_cast<size_t>(i - 700)];
    ASSERT_EQ(s.token_ids, want) << i;
    EXPECT_EQ(ds->length(i), static_cast<int64_t>(want.size()));
  }
  // The layout as h5py sees it.
  const auto j = inspect(dir / "train-00000-of-00002.h5");
  EXPECT_EQ(j["attrs"]["format"], "tupe-pretrain-shard");
  EXPECT_EQ(j["attrs"]["format_version"], 3);
  EXPECT_EQ(j["attrs"]["num_sequences"], 700);
  EXPECT_EQ(j["attrs"]["vocab_sha256"], kSha);
  for (const char* key : {"tokenizer_kind", "vocab_size", "lower_case", "pad_id", "unk_id", "cls_id", "sep_id",
                          "mask_id", "max_seq_len", "num_tokens", "command_line", "seed", "split", "shard_index"})
    EXPECT_TRUE(j["attrs"].contains(key)) << key;
  int64_t tokens = 0, sum = 0;
  for (const auto& q : a) {
    tokens += static_cast<int64_t>(q.size());
    for (const int32_t id : q) sum += id;
  }
  EXPECT_EQ(j["attrs"]["num_tokens"], tokens);
  const auto& ids = j["datasets"]["token_ids"];
  EXPECT_EQ(ids["dtype"], "uint16");
  EXPECT_TRUE(ids["compression"].is_null()) << "unfiltered by default: read by file offset";
  EXPECT_FALSE(ids["chunks"].is_null());
  EXPECT_EQ(ids["shape"][0], tokens);
  EXPECT_EQ(ids["sum"], sum);
  EXPECT_EQ(j["datasets"]["sequence_lengths"]["sum"], tokens);
  // Every generated sequence is [CLS] ordinary... [SEP]: tokens - 2 per sequence are candidates.
  EXPECT_EQ(j["datasets"]["ordinary_counts"]["dtype"], "uint16");
  EXPECT_EQ(j["datasets"]["ordinary_counts"]["sum"], tokens - 2 * 700);
  EXPECT_EQ(j["datasets"]["sample_checksums"]["dtype"], "uint32");
  EXPECT_EQ(j["datasets"]["sample_checksums"]["shape"][0], 700);
}

TEST(DataShards, SmallestIdDtypeForTheVocabulary) {
  test::TempDir dir("dtype");
  for (const auto& [vocab, dtype] : std::vector<std::pair<int64_t, std::string>>{{200, "uint8"}, {70000, "int32"}}) {
    const std::string path = dir / ("train-" + std::to_string(vocab) + ".h5");
    const auto seqs = sequences(50, vocab, 4);
    write_shard(path, header(vocab, 0, 1), seqs);
    EXPECT_EQ(inspect(path)["datasets"]["token_ids"]["dtype"], dtype);
    const auto ds = open_pretrain_dataset({path}, DatasetOptions{});
    Sample s;
    for (int64_t i = 0; i < 50; ++i) {
      ds->get(i, s);
      EXPECT_EQ(s.token_ids, seqs[static_cast<size_t>(i)]);
    }
  }
}

TEST(DataShards, NothingUnderTheFinalNameUntilCommit) {
  test::TempDir dir("commit");
  const std::string path = dir / "train-00000-of-00001.h5";
  {
    ShardWriter w(path, header(30522, 0, 1));
    const auto seqs = sequences(10, 30522, 5);
    for (const auto& s : seqs) w.append(s.data(), static_cast<int64_t>(s.size()));
    EXPECT_FALSE(std::filesystem::exists(path));
    EXPECT_TRUE(std::filesystem::exists(w.temp_path()));
    w.close();
    EXPECT_FALSE(std::filesystem::exists(path));
  }  // destroyed without commit: an interrupted run
  EXPECT_TRUE(std::filesystem::is_empty(dir.str())) << "no shard and no temporary file left";
  const std::vector<int32_t> bad{101, 40000, 102};
  ShardWriter w(path, header(30522, 0, 1));
  test::expect_error([&] { w.append(bad.data(), 3); }, {"id 40000", "vocabulary of size 30522"});
}

TEST(DataShards, BadOwnShardsAreRefusedWithFileAndCause) {
  test::TempDir dir("bad-own");
  const std::string good = dir / "good.h5";
  write_shard(good, header(30522, 0, 1), sequences(200, 30522, 6));
  const auto r = test::run_command(test::python() + " " + test::test_source_dir() + "/shard_files.py corrupt " + good +
                                   " " + dir.str());
  ASSERT_EQ(r.status, 0) << "h5py (via $TUPE_PYTHON) is required: " << r.output;
  DatasetOptions opt;
  opt.expected_vocab_sha256 = std::string(64, 'b');
  test::expect_error([&] { open_pretrain_dataset({good}, opt); },
                     {good, "vocabulary SHA-256 " + kSha, "differs from the expected " + std::string(64, 'b')});
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
      {"own_missing.h5", {"missing dataset 'sequence_lengths'"}},
      {"own_float_ids.h5", {"dataset 'token_ids' has dtype float32, expected an integer type"}},
      {"own_lengths_mismatch.h5", {"'sequence_lengths' sums to", "'token_ids' holds"}},
      {"own_version.h5", {"format version 99"}},
      {"own_truncated.h5", {"cannot open as HDF5", "truncated"}},
  };
  for (const auto& [name, fragments] : cases) {
    std::vector<std::string> all = fragments;
    all.push_back(dir / name);
    SCOPED_TRACE(name);
    try {
      open_pretrain_dataset({dir / name}, DatasetOptions{});
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
      for (const auto& f : all) EXPECT_NE(msg.find(f), std::string::npos) << "'" << f << "' not in: " << msg;
    }
  }
}

TEST(DataShards, EveryRunsShardSetMustBeWhole) {
  test::TempDir dir("sets");
  auto shard = [&](const std::string& folder, int64_t s, int64_t n, const std::string& run) {
    std::filesystem::create_directories(dir / folder);
    ShardHeader h = header(30522, s, n);
    h.run_id = run;
    const std::string path = dir / folder + "/" + shard_file_name("train", s, n);
    write_shard(path, h, sequences(5, 30522, static_cast<uint64_t>(7 + s)));
    return path;
  };
  // Shards 0 and 2 of 3: shard 1 is named as missing.
  const std::string s0 = shard("gap", 0, 3, "run-a");
  shard("gap", 2, 3, "run-a");
  test::expect_error([&] { open_pretrain_dataset({dir / "gap"}, DatasetOptions{}); },
                     {s0, "incomplete shard set", "1 of the 3 train shards", "train-00001-of-00003.h5"});
  // The missing index taken from another run (same name, other run id): still refused.
  shard("gap", 1, 3, "run-b");
  test::expect_error([&] { open_pretrain_dataset({dir / "gap"}, DatasetOptions{}); },
                     {"incomplete shard set", "2 different preprocess runs"});
  // From the right run: whole.
  shard("gap", 1, 3, "run-a");
  EXPECT_EQ(open_pretrain_dataset({dir / "gap"}, DatasetOptions{})->size(), 15);
  // One index listed twice (the same file through two paths).
  test::expect_error([&] { open_pretrain_dataset({s0, dir / "gap"}, DatasetOptions{}); }, {"listed twice", s0});
  // Two whole sets of different runs (two corpora) together: accepted, samples back to back.
  const std::string other = shard("other", 0, 1, "run-c");
  EXPECT_EQ(open_pretrain_dataset({dir / "gap", other}, DatasetOptions{})->size(), 20);
  // Shards without a run id (written before it was recorded) group by what made them.
  ShardHeader old = header(30522, 1, 2);
  std::filesystem::create_directories(dir / "old");
  write_shard(dir / "old" + "/" + shard_file_name("train", 1, 2), old, sequences(5, 30522, 9));
  test::expect_error([&] { open_pretrain_dataset({dir / "old"}, DatasetOptions{}); },
                     {"incomplete shard set", "train-00000-of-00002.h5"});
}

TEST(DataShards, DeclaredSizesAreCheckedBeforeAllocating) {
  const hsize_t huge = hsize_t{1} << 62;
  test::expect_error([&] { h5::checked_numel("f.h5", "input_ids", {4, huge}, 4); },
                     {"f.h5", "'input_ids'", "declares shape [4, 4611686018427387904]"});
  test::expect_error([&] { h5::checked_numel("f.h5", "token_ids", {hsize_t{1} << 50}, 2); }, {"more than 1 TiB"});
  EXPECT_EQ(h5::checked_numel("f.h5", "input_ids", {1000, 128}, 4), 128000u);
  EXPECT_EQ(h5::checked_numel("f.h5", "x", {0, huge}, 8), 0u);
}

TEST(DataShards, TemporaryFilesOfDeadWritersAreRemoved) {
  test::TempDir dir("stale");
  // A pid that no longer exists: a child that has exited and been reaped.
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ASSERT_GT(child, 0);
  ::waitpid(child, nullptr, 0);
  const std::string host = host_name(), dead = std::to_string(child), me = std::to_string(::getpid());
  auto touch = [&](const std::string& name) {
    std::ofstream(dir / name) << "x";
    return dir / name;
  };
  const std::string stale = touch("train-00000-of-00001.h5.tmp-" + host + "-" + dead);
  const std::string legacy = touch("validation-00000-of-00001.h5.tmp-" + dead);
  const std::string alive = touch("train-00001-of-00002.h5.tmp-" + host + "-" + me);
  const std::string remote = touch("train-00002-of-00003.h5.tmp-node-that-is-not-this-one-" + dead);
  const std::string unrelated = touch("notes.txt");
  std::vector<std::string> kept;
  auto removed = remove_stale_temp_shards(dir.str(), /*every_host=*/false, &kept);
  std::sort(removed.begin(), removed.end());
  std::vector<std::string> want{stale, legacy};
  std::sort(want.begin(), want.end());
  EXPECT_EQ(removed, want);
  EXPECT_EQ(kept, std::vector<std::string>{remote});
  for (const auto& f : {alive, remote, unrelated}) EXPECT_TRUE(std::filesystem::exists(f)) << f;
  // Holding the folder's lock: another host's temporary file is a dead run's too.
  kept.clear();
  EXPECT_EQ(remove_stale_temp_shards(dir.str(), /*every_host=*/true, &kept), std::vector<std::string>{remote});
  EXPECT_TRUE(kept.empty());
  for (const auto& f : {alive, unrelated}) EXPECT_TRUE(std::filesystem::exists(f)) << f;
}

/// The formula of shard_files.py for row r.
struct NvRow {
  std::vector<int32_t> ids, labels, positions;
  std::vector<int8_t> segments;
  int32_t nsp;
};
NvRow nv_row(int64_t r) {
  NvRow row;
  const int64_t n = 10 + 2 * (r % 7);
  for (int64_t j = 0; j < n; ++j) {
    row.ids.push_back(j == 0 ? 101 : j == n - 1 ? 102 : static_cast<int32_t>(1000 + (37 * r + 11 * j) % 20000));
    row.segments.push_back(j < n / 2 ? 0 : 1);
  }
  for (int64_t k = 0; k < 1 + r % 4; ++k) {
    const int32_t p = static_cast<int32_t>(1 + 2 * k);
    row.positions.push_back(p);
    row.labels.push_back(row.ids[static_cast<size_t>(p)]);
    row.ids[static_cast<size_t>(p)] = 103;
  }
  row.nsp = static_cast<int32_t>(r % 2);
  return row;
}

class DataNvidia : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new test::TempDir("nvidia");
    const auto r = test::run_command(test::python() + " " + test::test_source_dir() + "/shard_files.py nvidia " + dir_->str());
    ASSERT_EQ(r.status, 0) << "h5py (via $TUPE_PYTHON) is required: " << r.output;
  }
  static void TearDownTestSuite() { delete dir_; }
  static DatasetOptions options() {
    DatasetOptions o;
    o.vocab_size = 30522;
    return o;
  }
  static test::TempDir* dir_;
};
test::TempDir* DataNvidia::dir_ = nullptr;

TEST_F(DataNvidia, Int32AndInt64ShardsReadWithStaticMasks) {
  for (const char* name : {"nv_int32_training_0.hdf5", "nv_int64_training_0.hdf5"}) {
    SCOPED_TRACE(name);
    const auto ds = open_pretrain_dataset({*dir_ / name}, options());
    ASSERT_EQ(ds->size(), 12);
    EXPECT_EQ(ds->info().format, "nvidia");
    EXPECT_EQ(ds->info().max_seq_len, 24);
    EXPECT_TRUE(ds->info().has_static_masks && ds->info().has_segment_ids && ds->info().has_next_sentence_labels);
    Sample s;
    for (int64_t r = 0; r < 12; ++r) {
      const NvRow want = nv_row(r);
      ds->get(r, s);
      EXPECT_EQ(s.token_ids, want.ids) << r;
      EXPECT_EQ(s.segment_ids, want.segments) << r;
      EXPECT_EQ(s.masked_positions, want.positions) << r << ": the first 0 ends the list";
      EXPECT_EQ(s.masked_labels, want.labels) << r;
      EXPECT_EQ(s.next_sentence_label, want.nsp) << r;
    }
    // Through the loader (natural order: evaluation iterator), stored masks used as they are.
    DataOptions cfg;
    cfg.global_batch_size = 12;
    EvalIterator it(ds, cfg, 0, 1);
    const MlmBatch b = *it.next();
    const int64_t len = b.input_ids.size(1);
    EXPECT_EQ(len, 24) << "the longest row (22 tokens) rounded up to 8";
    std::vector<int64_t> pos, lab;
    for (int64_t r = 0; r < 12; ++r) {
      const NvRow want = nv_row(r);
      for (size_t k = 0; k < want.positions.size(); ++k) {
        pos.push_back(r * len + want.positions[k]);
        lab.push_back(want.labels[k]);
      }
      EXPECT_EQ(b.next_sentence_labels[r].item<int64_t>(), want.nsp);
      EXPECT_EQ(b.segment_ids[r][static_cast<int64_t>(want.ids.size()) - 1].item<int64_t>(), 1);
      EXPECT_EQ(b.input_ids[r][1].item<int64_t>(), 103);
    }
    EXPECT_EQ(std::vector<int64_t>(b.masked_positions.data_ptr<int64_t>(), b.masked_positions.data_ptr<int64_t>() + b.masked_positions.size(0)), pos);
    EXPECT_EQ(std::vector<int64_t>(b.masked_labels.data_ptr<int64_t>(), b.masked_labels.data_ptr<int64_t>() + b.masked_labels.size(0)), lab);
    EXPECT_EQ(b.global_masked_count, static_cast<int64_t>(pos.size()));
    // Stored masks not used: originals restored, masks drawn dynamically.
    cfg.use_static_masks = false;
    EvalIterator dyn(ds, cfg, 0, 1);
    const MlmBatch d = *dyn.next();
    for (int64_t k = 0; k < d.masked_positions.size(0); ++k) {
      const int64_t p = d.masked_positions[k].item<int64_t>();
      std::vector<int32_t> orig = nv_row(p / len).ids;
      const NvRow row = nv_row(p / len);
      for (size_t q = 0; q < row.positions.size(); ++q) orig[static_cast<size_t>(row.positions[q])] = row.labels[q];
      EXPECT_EQ(d.masked_labels[k].item<int64_t>(), orig[static_cast<size_t>(p % len)]);
    }
    // With 3 ranks each counts the others' masked tokens without drawing them: the sum of
    // the ranks' M is every rank's global_masked_count, static masks or not.
    for (const bool use_static : {true, false}) {
      cfg.use_static_masks = use_static;
      int64_t sum = 0, global = -1;
      for (int64_t r = 0; r < 3; ++r) {
        EvalIterator part(ds, cfg, r, 3);
        const MlmBatch pb = *part.next();
        sum += pb.masked_positions.size(0);
        if (global >= 0) {
          EXPECT_EQ(pb.global_masked_count, global);
        }
        global = pb.global_masked_count;
      }
      EXPECT_EQ(sum, global) << "static masks " << use_static;
    }
  }
}

TEST_F(DataNvidia, BadFilesAreRefusedWithFileAndCause) {
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
      {"bad_missing.hdf5", {"missing dataset 'masked_lm_ids'"}},
      {"bad_dtype.hdf5", {"dataset 'input_ids' has dtype float32, expected an integer type"}},
      {"bad_shape.hdf5", {"dataset 'input_mask' has shape [12, 23], expected [12, 24]"}},
      {"bad_truncated.hdf5", {"cannot open as HDF5", "truncated"}},
      {"not_hdf5.hdf5", {"cannot open as HDF5", "no HDF5 signature"}},
  };
  for (const auto& [name, fragments] : cases) {
    SCOPED_TRACE(name);
    const std::string path = *dir_ / name;
    try {
      open_pretrain_dataset({path}, options());
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
      EXPECT_EQ(msg.rfind(path + ": ", 0), 0u) << "starts with the file: " << msg;
      for (const auto& f : fragments) EXPECT_NE(msg.find(f), std::string::npos) << "'" << f << "' not in: " << msg;
    }
  }
  test::expect_error([&] { open_pretrain_dataset({*dir_ / "nv_int32_training_0.hdf5"}, DatasetOptions{}); },
                     {"nv_int32_training_0.hdf5", "vocabulary size must be given"});
  DatasetOptions small = options();
  small.vocab_size = 1200;
  test::expect_error([&] { open_pretrain_dataset({*dir_ / "nv_int32_training_0.hdf5"}, small); },
                     {"outside the vocabulary of size 1200"});
  // A folder: the split picks the "training" files, sorted.
  const auto files = list_shard_files({dir_->str()}, "train");
  ASSERT_EQ(files.size(), 2u);
  EXPECT_NE(files[0].find("nv_int32_training_0"), std::string::npos);
}

}  // namespace
}  // namespace tupe::data_pipeline
