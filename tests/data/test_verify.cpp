// `tupe verify` (cli/cmd_verify.cpp, data_pipeline/shard_verify.h) on WikiText-2's test split
// preprocessed with configs/tiny.ini (2 train shards, 1 validation shard), damaged as disks
// and scripts damage shards: a zeroed 8 KB block, a flipped bit, a changed sequence_lengths
// entry (two, keeping the sum; one, breaking it), a missing shard, a shard of another
// preprocess run under the same name. Each finding is checked against what the test derives
// itself: the damaged bytes' file offsets (tests/data/shard_damage.h) mapped to tokens and
// to samples through sequence_lengths read back with HDF5. The same lines under
// `mpirun -np 2`; --checkpoint on a good and a damaged checkpoint; data.verify_at_start stops
// a pre-training before step 1.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>
#include <sstream>

#include "data_pipeline/hdf5_util.h"
#include "data_test_util.h"
#include "shard_damage.h"

namespace fs = std::filesystem;

namespace tupe::data_pipeline {
namespace {

std::string config() { return ::tupe::testing::source_path("configs/tiny.ini"); }

/// The good set, preprocessed once for the suite, and a second run of the same text with
/// another seed (another run id, the same file names).
struct Sets {
  test::TempDir dir{"verify"};
  std::string good = dir / "good", other = dir / "other";
  Sets() {
    for (const auto& [out, seed] : {std::pair{good, 1}, std::pair{other, 2}}) {
      const auto r = test::run_command(test::tupe_bin() + " preprocess --quiet --config " + config() + " --input " +
                                       test::wikitext_test_path() + " --output " + out + " --tokenizer.vocab " +
                                       test::vocab_path() + " --preprocess.seed " + std::to_string(seed));
      EXPECT_EQ(r.status, 0) << r.output;
    }
  }
  /// A copy of the good set in folder `name` (shards only).
  std::string copy(const std::string& name) const {
    const std::string to = dir / name;
    fs::create_directories(to);
    for (const auto& e : fs::directory_iterator(good))
      if (e.path().extension() == ".h5") fs::copy_file(e.path(), to + "/" + e.path().filename().string());
    return to;
  }
  static std::string train(const std::string& folder, int s) { return folder + "/" + shard_file_name("train", s, 2); }
};

Sets& sets() {
  static Sets s;  // built once, for every test of the suite; removed at exit
  return s;
}

/// The lengths of shard `path`'s samples, read with HDF5.
std::vector<int32_t> lengths_of(const std::string& path) {
  h5::Lock lock;
  h5::Id file = h5::open_file_readonly(path);
  std::vector<int32_t> out;
  h5::read_integer_dataset(path, file.get(), kSequenceLengthsDataset, 1, out);
  return out;
}

/// The sample holding token `token` (from the lengths).
int64_t sample_of(const std::vector<int32_t>& lengths, int64_t token) {
  int64_t at = 0;
  for (size_t i = 0; i < lengths.size(); ++i) {
    at += lengths[i];
    if (token < at) return static_cast<int64_t>(i);
  }
  return -1;
}

/// The verify output's lines: those naming a file (absolute paths, as the tests give them)
/// and the summary, less the timing line ("verify: read ...") and what mpirun adds.
std::vector<std::string> lines_of(const std::string& output) {
  std::vector<std::string> out;
  std::istringstream in(output);
  for (std::string line; std::getline(in, line);)
    if ((line.rfind("/", 0) == 0 || line.rfind("verify: ", 0) == 0) && line.rfind("verify: read ", 0) != 0)
      out.push_back(line);
  return out;
}

test::CommandResult verify(const std::string& args) { return test::run_command(test::tupe_bin() + " verify " + args); }

/// The one line naming `file` (fails unless exactly one).
std::string line_naming(const std::vector<std::string>& lines, const std::string& file) {
  std::vector<std::string> hits;
  for (const auto& l : lines)
    if (l.rfind(file + ":", 0) == 0) hits.push_back(l);
  EXPECT_EQ(hits.size(), 1u) << file;
  return hits.empty() ? "" : hits.front();
}

TEST(DataVerify, AGoodSetPasses) {
  const auto r = verify("--shards " + sets().good);
  EXPECT_EQ(r.status, 0) << r.output;
  const auto lines = lines_of(r.output);
  ASSERT_EQ(lines.size(), 1u) << r.output;
  int64_t samples = 0;
  for (int s = 0; s < 2; ++s) samples += static_cast<int64_t>(lengths_of(Sets::train(sets().good, s)).size());
  samples += static_cast<int64_t>(lengths_of(sets().good + "/" + shard_file_name("validation", 0, 1)).size());
  EXPECT_EQ(lines[0], "verify: 3 shard files, " + std::to_string(samples) +
                          " samples: whole; every sample matches its checksum");
}

TEST(DataVerify, AZeroedBlockNamesItsFirstSampleAndTheCount) {
  const std::string folder = sets().copy("zeroed");
  const std::string shard = Sets::train(folder, 0);
  const test::Layout tokens = test::layout_of(shard, kTokenIdsDataset);
  const int64_t first_token = 3000, bytes = 8192;
  const int64_t offset = tokens.offset_of(first_token);
  test::zero_bytes(shard, offset, bytes);
  // The samples whose tokens lie in the zeroed bytes (ids are never 0 = [PAD] in the data).
  const auto lengths = lengths_of(shard);
  std::set<int64_t> hit;
  for (int64_t t = 0; t < tokens.numel; ++t)
    if (tokens.offset_of(t) >= offset && tokens.offset_of(t) < offset + bytes) hit.insert(sample_of(lengths, t));
  ASSERT_EQ(hit.size() > 1, true);
  const auto r = verify("--shards " + folder);
  EXPECT_EQ(r.status, 1) << r.output;
  const auto lines = lines_of(r.output);
  ASSERT_EQ(lines.size(), 2u) << r.output;
  EXPECT_EQ(line_naming(lines, shard).rfind(shard + ": " + std::to_string(hit.size()) + " of " +
                                                std::to_string(lengths.size()) + " samples fail their check; the first: "
                                                "sample " + std::to_string(*hit.begin()) + " (tokens ",
                                            0),
            0u)
      << r.output;
  EXPECT_NE(lines[0].find("checksum mismatch"), std::string::npos) << lines[0];
  EXPECT_EQ(lines[1], "verify: 3 shard files, " + std::to_string(
                          lengths.size() + lengths_of(Sets::train(folder, 1)).size() +
                          lengths_of(folder + "/" + shard_file_name("validation", 0, 1)).size()) +
                          " samples: 1 damaged file, 0 set problems");
}

TEST(DataVerify, AFlippedBitIsOneBadSample) {
  const std::string folder = sets().copy("flipped");
  const std::string shard = Sets::train(folder, 1);
  const test::Layout tokens = test::layout_of(shard, kTokenIdsDataset);
  const int64_t token = tokens.numel / 2;
  test::flip_bit(shard, tokens.offset_of(token) + 1, 3);
  const auto lengths = lengths_of(shard);
  const auto r = verify("--shards " + folder);
  EXPECT_EQ(r.status, 1) << r.output;
  const std::string line = line_naming(lines_of(r.output), shard);
  EXPECT_EQ(line.rfind(shard + ": 1 of " + std::to_string(lengths.size()) + " samples fail their check; the first: "
                                                                              "sample " +
                           std::to_string(sample_of(lengths, token)) + " (",
                       0),
            0u)
      << line;
}

/// Writes `value` as sequence_lengths[i] of `path` (int32 little-endian, in place).
void set_length(const std::string& path, int64_t i, int32_t value) {
  const test::Layout l = test::layout_of(path, kSequenceLengthsDataset);
  ASSERT_EQ(l.element_bytes, 4);
  const int fd = ::open(path.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::pwrite(fd, &value, 4, l.offset_of(i)), 4);
  ::close(fd);
}

TEST(DataVerify, AChangedIndexEntryIsFound) {
  // Two entries changed, the sum kept: both samples (and only they) fail their checksum.
  const std::string folder = sets().copy("index");
  const std::string shard = Sets::train(folder, 0);
  const auto lengths = lengths_of(shard);
  int64_t i = 10;
  while (!(lengths[static_cast<size_t>(i)] < 128 && lengths[static_cast<size_t>(i) + 1] > 3)) ++i;
  set_length(shard, i, lengths[static_cast<size_t>(i)] + 1);
  set_length(shard, i + 1, lengths[static_cast<size_t>(i) + 1] - 1);
  auto r = verify("--shards " + folder);
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_EQ(line_naming(lines_of(r.output), shard)
                .rfind(shard + ": 2 of " + std::to_string(lengths.size()) +
                           " samples fail their check; the first: sample " + std::to_string(i) + " (",
                       0),
            0u)
      << r.output;
  // One entry changed: the lengths no longer sum to the tokens recorded.
  set_length(shard, i + 1, lengths[static_cast<size_t>(i) + 1]);
  r = verify("--shards " + folder);
  EXPECT_EQ(r.status, 1) << r.output;
  const std::string line = line_naming(lines_of(r.output), shard);
  EXPECT_NE(line.find("'sequence_lengths' sums to"), std::string::npos) << line;
}

TEST(DataVerify, AMissingShardIsNamed) {
  const std::string folder = sets().copy("missing");
  fs::remove(Sets::train(folder, 1));
  const auto r = verify("--shards " + folder);
  EXPECT_EQ(r.status, 1) << r.output;
  const auto lines = lines_of(r.output);
  ASSERT_EQ(lines.size(), 2u) << r.output;
  EXPECT_EQ(lines[0], Sets::train(folder, 0) +
                          ": incomplete shard set: 1 of the 2 train shards of its preprocess run are missing "
                          "(train-00001-of-00002.h5)");
  EXPECT_NE(lines[1].find(": 0 damaged files, 1 set problem"), std::string::npos) << lines[1];
}

TEST(DataVerify, AShardOfAnotherRunIsNamed) {
  const std::string folder = sets().copy("foreign");
  fs::copy_file(Sets::train(sets().other, 1), Sets::train(folder, 1), fs::copy_options::overwrite_existing);
  const auto r = verify("--shards " + folder);
  EXPECT_EQ(r.status, 1) << r.output;
  const auto lines = lines_of(r.output);
  ASSERT_EQ(lines.size(), 3u) << r.output;  // each run's set lacks a shard; then the summary
  std::set<std::string> got(lines.begin(), lines.end() - 1);
  const std::string tail = " of its preprocess run are missing (train-0000";
  for (int s = 0; s < 2; ++s) {
    const std::string want = Sets::train(folder, s) + ": incomplete shard set: 1 of the 2 train shards" + tail +
                             std::to_string(1 - s) + "-of-00002.h5); the listed shards come from 2 different "
                                                     "preprocess runs";
    EXPECT_EQ(got.count(want), 1u) << want << "\n" << r.output;
  }
}

TEST(DataVerify, TheSameLinesUnderMpirun) {
  const std::string folder = sets().copy("mpi");
  const std::string shard0 = Sets::train(folder, 0);
  test::flip_bit(shard0, test::layout_of(shard0, kTokenIdsDataset).offset_of(100), 0);
  fs::copy_file(Sets::train(sets().other, 1), Sets::train(folder, 1), fs::copy_options::overwrite_existing);
  const auto one = verify("--shards " + folder);
  const auto two = test::run_command("OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun -np 2 "
                                     "--oversubscribe --bind-to none " +
                                     test::tupe_bin() + " verify --shards " + folder);
  EXPECT_EQ(one.status, 1) << one.output;
  EXPECT_EQ(two.status, 1) << two.output;
  EXPECT_EQ(lines_of(one.output), lines_of(two.output)) << one.output << "\n---\n" << two.output;
  EXPECT_NE(two.output.find("on 2 ranks"), std::string::npos) << two.output;
  EXPECT_EQ(lines_of(one.output).size(), 4u) << one.output;
}

TEST(DataVerify, ACheckpointIsRehashedAgainstItsManifest) {
  const std::string ck = sets().dir / "ck";
  const auto r = test::run_command(test::tupe_bin() + " pretrain --config " + config() + " --data.train_shards " +
                                   sets().good + " --data.validation_shards \"\" --train.max_steps 2 --resume none "
                                   "--checkpoint.every_steps 1 --checkpoint.keep_last 0 --checkpoint.dir " + ck);
  ASSERT_EQ(r.status, 0) << r.output;
  auto v = verify("--checkpoint " + ck);
  EXPECT_EQ(v.status, 0) << v.output;
  EXPECT_NE(v.output.find("verify: 2 checkpoints: whole"), std::string::npos) << v.output;
  const std::string step = ck + "/step_00000002";
  v = verify("--checkpoint " + step);
  EXPECT_EQ(v.status, 0) << v.output;
  EXPECT_NE(v.output.find("verify: 1 checkpoint: whole"), std::string::npos) << v.output;
  const std::string model = step + "/model.safetensors";
  test::flip_bit(model, static_cast<int64_t>(fs::file_size(model)) - 5, 2);  // in the weights' bytes
  v = verify("--checkpoint " + ck);
  EXPECT_EQ(v.status, 1) << v.output;
  const auto lines = lines_of(v.output);
  ASSERT_EQ(lines.size(), 2u) << v.output;
  EXPECT_EQ(lines[0].rfind(model + ": SHA-256 ", 0), 0u) << lines[0];
  EXPECT_NE(lines[0].find("differs from the manifest's"), std::string::npos) << lines[0];
  EXPECT_NE(lines[1].find("verify: 2 checkpoints: 1 damaged"), std::string::npos) << lines[1];
}

TEST(DataVerify, VerifyAtStartStopsAPretrainingBeforeStep1) {
  const std::string folder = sets().copy("at-start");
  const std::string shard = Sets::train(folder, 1);
  test::flip_bit(shard, test::layout_of(shard, kTokenIdsDataset).offset_of(7), 5);
  const auto v = verify("--shards " + Sets::train(folder, 0) + " " + shard);
  const auto r = test::run_command(test::tupe_bin() + " pretrain --config " + config() + " --data.train_shards " +
                                   folder + " --data.validation_shards \"\" --train.max_steps 3 --resume none "
                                   "--train.log_every 1 --data.verify_at_start true --checkpoint.dir " +
                                   (sets().dir / "ck-at-start"));
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_EQ(r.output.find("step 1/"), std::string::npos) << r.output;
  const auto verify_lines = lines_of(v.output);
  ASSERT_EQ(verify_lines.size(), 2u) << v.output;
  EXPECT_NE(r.output.find(verify_lines[0] + "\n"), std::string::npos) << r.output;  // the same line
  EXPECT_NE(r.output.find("error: data.verify_at_start: " + verify_lines[1]), std::string::npos) << r.output;
  // Under mpirun (each rank its share, the verdicts gathered through the watched communicator).
  const auto two = test::run_command("OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun -np 2 "
                                     "--oversubscribe --bind-to none " +
                                     test::tupe_bin() + " pretrain --config " + config() + " --data.train_shards " +
                                     folder + " --data.validation_shards \"\" --train.max_steps 3 --resume none "
                                     "--train.log_every 1 --data.verify_at_start true --checkpoint.dir " +
                                     (sets().dir / "ck-at-start-2"));
  EXPECT_NE(two.status, 0) << two.output;
  EXPECT_EQ(two.output.find("step 1/"), std::string::npos) << two.output;
  EXPECT_NE(two.output.find(verify_lines[0] + "\n"), std::string::npos) << two.output;
  EXPECT_NE(two.output.find("error: data.verify_at_start: " + verify_lines[1]), std::string::npos) << two.output;
  // A good set trains as before, with one line saying it was checked.
  const auto good = test::run_command(test::tupe_bin() + " pretrain --config " + config() + " --data.train_shards " +
                                      sets().good + " --data.validation_shards \"\" --train.max_steps 1 --resume none "
                                      "--data.verify_at_start true --checkpoint.dir " +
                                      (sets().dir / "ck-at-start-good"));
  EXPECT_EQ(good.status, 0) << good.output;
  EXPECT_NE(good.output.find("samples: whole; every sample matches its checksum (data.verify_at_start"),
            std::string::npos)
      << good.output;
}

}  // namespace
}  // namespace tupe::data_pipeline
