// The checkpoint store: bitwise round trip (weights, optimizer state, steps, scaler, RNG,
// data position, config, tokenizer, build), a crash between files (a forked child killed by
// the fault injection) leaves the previous checkpoint as latest(), and retention keeps exactly
// the right steps. Damaged files and untrusted JSON: test_checkpoint_integrity.cpp.
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <torch/version.h>

#include "tests/checkpoint/checkpoint_store_fixtures.h"

namespace tupe::checkpoint {
namespace {

namespace fs = std::filesystem;
using namespace testing;  // NOLINT: the fixtures of this folder

TEST(CheckpointStore, TrainerStateOfEarlierBuildsWithRngStatesStillReads) {
  // Older trainer states hold the generator states; they are accepted and ignored.
  const CheckpointContents c = make_contents(10);
  auto j = nlohmann::ordered_json::parse(trainer_state_to_json(c.state));
  EXPECT_FALSE(j.contains("rng"));
  j["rng"] = {{"cpu", "00ff"}, {"cuda", nlohmann::json::array()}};
  const TrainerState s = trainer_state_from_json(j.dump(), "old.json");
  EXPECT_EQ(s.step, 10);
  EXPECT_EQ(s.config, c.state.config);
}

TEST(CheckpointStore, TokenizerRecordAndCarriedVocabularyRoundTrip) {
  TempDir dir;
  CheckpointStore store(options_for(dir.path()));
  CheckpointContents c = make_contents(7);
  const std::string vocab = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nParis\nparis\n";
  c.vocab_bytes = vocab;
  c.state.tokenizer = TokenizerRecord{"wordpiece", false, "vocab.txt"};
  // The vocabulary must be the one vocab_sha256 names: nothing is written otherwise.
  EXPECT_NE(error_of([&] { store.save(c); }).find("differs from vocab_sha256"), std::string::npos);
  EXPECT_TRUE(CheckpointStore::whole_steps(dir.path()).empty());
  c.state.vocab_sha256 = sha256sum_of_bytes(dir.path(), vocab);
  const fs::path path = store.save(c);
  EXPECT_EQ(read_file_bytes(path / "vocab.txt"), vocab);
  const auto manifest = nlohmann::json::parse(read_file_bytes(path / "manifest.json"));
  EXPECT_EQ(manifest["files"]["vocab.txt"]["sha256"], sha256sum(path / "vocab.txt"));
  const CheckpointContents loaded = CheckpointStore::load(path);
  ASSERT_TRUE(loaded.state.tokenizer.has_value());
  EXPECT_EQ(loaded.state.tokenizer->kind, "wordpiece");
  EXPECT_FALSE(loaded.state.tokenizer->lower_case);
  EXPECT_EQ(loaded.state.tokenizer->vocab_file, "vocab.txt");
  EXPECT_EQ(loaded.vocab_bytes, vocab);
  EXPECT_EQ(loaded.state.format_version, 2);
  // A changed vocabulary byte is damage.
  flip_byte(path / "vocab.txt", 3);
  EXPECT_NE(load_error(path).find("vocab.txt: SHA-256"), std::string::npos) << load_error(path);
  // A record in a version-1 file, a reserved or non-plain file name, a bad kind: refused.
  auto j = nlohmann::ordered_json::parse(trainer_state_to_json(c.state));
  j["format_version"] = 1;
  EXPECT_NE(error_of([&] { trainer_state_from_json(j.dump(), "s.json"); })
                .find("s.json: key 'tokenizer': not part of format version 1"),
            std::string::npos);
  j["format_version"] = 2;
  j["tokenizer"]["vocab_file"] = "../vocab.txt";
  EXPECT_NE(error_of([&] { trainer_state_from_json(j.dump(), "s.json"); }).find("is not a plain file name"),
            std::string::npos);
  j["tokenizer"]["vocab_file"] = "vocab.txt";
  j["tokenizer"]["kind"] = "bpe";
  EXPECT_NE(error_of([&] { trainer_state_from_json(j.dump(), "s.json"); })
                .find("key 'tokenizer.kind': expected wordpiece or sentencepiece, got 'bpe'"),
            std::string::npos);
  c.state.tokenizer->vocab_file = "manifest.json";
  EXPECT_NE(error_of([&] { store.save(c); }).find("is a name the checkpoint uses"), std::string::npos);
  // Version 1 (no record) still reads, with no record.
  auto v1 = nlohmann::ordered_json::parse(trainer_state_to_json(make_contents(8).state));
  v1["format_version"] = 1;
  const TrainerState old = trainer_state_from_json(v1.dump(), "old.json");
  EXPECT_FALSE(old.tokenizer.has_value());
  EXPECT_EQ(old.format_version, 1);
}

TEST(CheckpointStore, TrainerStateRecordsTheBuildThatWroteIt) {
  TempDir dir;
  CheckpointStore store(options_for(dir.path()));
  const fs::path path = store.save(make_contents(3));
  const auto j = nlohmann::ordered_json::parse(read_file_bytes(path / "trainer_state.json"));
  ASSERT_TRUE(j.contains("build")) << j.dump();
  // Every fact of common/build_info.h, in its order, each a non-empty string.
  std::vector<std::string> keys;
  for (const auto& [k, v] : j["build"].items()) {
    keys.push_back(k);
    ASSERT_TRUE(v.is_string()) << k;
    EXPECT_FALSE(v.get<std::string>().empty()) << k;
  }
  EXPECT_EQ(keys, (std::vector<std::string>{"tupe", "commit", "build_type", "libtorch", "cuda", "nccl", "openmpi", "hdf5"}));
  EXPECT_EQ(j["build"]["libtorch"].get<std::string>(), std::to_string(TORCH_VERSION_MAJOR) + "." +
                                                           std::to_string(TORCH_VERSION_MINOR) + "." +
                                                           std::to_string(TORCH_VERSION_PATCH));
  // Read back: the file's record, not this build's.
  auto edited = j;
  edited["build"]["commit"] = "0000000";
  const TrainerState s = trainer_state_from_json(edited.dump(), "s.json");
  ASSERT_EQ(s.build.size(), 8u);
  EXPECT_EQ(s.build[1], (std::pair<std::string, std::string>{"commit", "0000000"}));
  // A file without the record (written before it) reads with none, and writes none back.
  edited.erase("build");
  const TrainerState old = trainer_state_from_json(edited.dump(), "old.json");
  EXPECT_TRUE(old.build.empty());
  EXPECT_FALSE(nlohmann::ordered_json::parse(trainer_state_to_json(old)).contains("build"));
  // A record that is not an object of strings is refused in one line.
  edited["build"] = {{"commit", 7}};
  EXPECT_NE(error_of([&] { trainer_state_from_json(edited.dump(), "s.json"); })
                .find("s.json: key 'build.commit': expected a string, got 7"),
            std::string::npos);
  edited["build"] = "6f44105";
  EXPECT_NE(error_of([&] { trainer_state_from_json(edited.dump(), "s.json"); })
                .find("s.json: key 'build': expected an object of strings"),
            std::string::npos);
}

TEST(CheckpointStore, TrainerStateRecordsTheAttentionKernels) {
  TrainerState s = trainer_state_from_json(trainer_state_to_json(TrainerState{}), "s.json");
  EXPECT_TRUE(s.attention_kernels.empty());  // none known: none written, none read
  EXPECT_FALSE(nlohmann::ordered_json::parse(trainer_state_to_json(s)).contains("attention_kernels"));
  s.attention_kernels = {{"training", "explicit (CPU training path)"}, {"evaluation", "math"}};
  const auto j = nlohmann::ordered_json::parse(trainer_state_to_json(s));
  EXPECT_EQ(j["attention_kernels"]["training"], "explicit (CPU training path)");
  EXPECT_EQ(trainer_state_from_json(j.dump(), "s.json").attention_kernels, s.attention_kernels);
  auto bad = j;
  bad["attention_kernels"]["evaluation"] = 3;
  EXPECT_NE(error_of([&] { trainer_state_from_json(bad.dump(), "s.json"); })
                .find("s.json: key 'attention_kernels.evaluation': expected a string, got 3"),
            std::string::npos);
}

TEST(CheckpointStore, SaveLoadRoundTripIsBitwise) {
  TempDir dir;
  CheckpointStore store(options_for(dir.path()));
  at::manual_seed(77);
  const CheckpointContents saved = make_contents(1500);
  const fs::path path = store.save(saved);
  EXPECT_EQ(path, dir / "step_00001500");
  for (const char* f : {"model.safetensors", "optimizer.safetensors", "trainer_state.json", "manifest.json"})
    EXPECT_TRUE(fs::is_regular_file(path / f)) << f;

  const CheckpointContents loaded = CheckpointStore::load(path);
  expect_same(saved.model, loaded.model);
  expect_same(saved.optimizer.tensors, loaded.optimizer.tensors);
  EXPECT_EQ(loaded.optimizer.metadata, saved.optimizer.metadata);
  const TrainerState& s = loaded.state;
  EXPECT_EQ(s.step, 1500);
  EXPECT_EQ(s.scheduler_step, 1499);
  EXPECT_EQ(s.loss_scaler.scale, 150.0);
  EXPECT_EQ(s.loss_scaler.growth_tracker, 7);
  EXPECT_EQ(s.loss_scaler.consecutive_skips, 1);
  EXPECT_EQ(s.loss_scaler.total_skips, 3);
  EXPECT_EQ(s.data.epoch, 2);
  EXPECT_EQ(s.data.consumed_samples, 13845);
  EXPECT_EQ(s.config, saved.state.config);
  EXPECT_EQ(s.vocab_sha256, saved.state.vocab_sha256);
  EXPECT_EQ(s.world_size, 8);
  EXPECT_EQ(s.format_version, kCheckpointFormatVersion);
  // No generator state is saved: resume reseeds every step from (seed, step, rank).
  EXPECT_EQ(read_file_bytes(path / "trainer_state.json").find("\"rng\""), std::string::npos);

  // Loading into a model and an optimizer through the strict helpers.
  NamedTensors model_targets;
  for (const auto& [name, t] : saved.model) model_targets.emplace_back(name, at::zeros_like(t));
  copy_named_tensors(model_targets, loaded.model, "model");
  expect_same(saved.model, model_targets);
  EXPECT_EQ(CheckpointStore::latest(dir.path()), path);
  // Integers where the model holds floats are damage, not a dtype conversion.
  NamedTensors as_ints = loaded.model;
  for (auto& [name, t] : as_ints)
    if (name == "encoder.embeddings.word.weight") t = t.to(at::kInt);
  try {
    copy_named_tensors(model_targets, as_ints, "model");
    ADD_FAILURE() << "int tensor copied into a float parameter";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("dtype of encoder.embeddings.word.weight: saved Int vs current Float"),
              std::string::npos)
        << e.what();
  }

  // An invalid state is refused before anything is written.
  CheckpointContents bad = make_contents(1600);
  bad.state.scheduler_step = -1;
  EXPECT_THROW(store.save(bad), Error);
  EXPECT_FALSE(fs::exists(dir / "step_00001600"));
  EXPECT_FALSE(fs::exists(dir / ".tmp-step_00001600"));
}

TEST(CheckpointStore, CrashBetweenFilesLeavesThePreviousCheckpointLatest) {
  TempDir dir;
  const CheckpointContents first = make_contents(1), second = make_contents(2);
  {
    CheckpointStore store(options_for(dir.path(), 3));
    store.save(first);
  }
  // Fault injection after file n (1 model, 2 optimizer, 3 trainer state, 4 manifest, 5 after
  // the rename), in a child process killed with std::_Exit via the environment variable.
  for (int n = 1; n <= 5; ++n) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::setenv("TUPE_TEST_CRASH_AFTER_FILES", std::to_string(n).c_str(), 1);
      try {
        CheckpointStore store(options_for(dir.path(), 3));
        store.save(second);
      } catch (...) {
        std::_Exit(2);
      }
      std::_Exit(0);  // not reached when the injection works
    }
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), kCrashInjectionExitCode) << "n = " << n;
    if (n <= 4) {
      EXPECT_EQ(CheckpointStore::latest(dir.path()), dir / "step_00000001") << "crash after file " << n;
      EXPECT_EQ(CheckpointStore::whole_steps(dir.path()), std::vector<int64_t>{1}) << n;
      EXPECT_FALSE(fs::exists(dir / "step_00000002")) << n;
      EXPECT_TRUE(fs::exists(dir / ".tmp-step_00000002")) << n;  // the debris a crash leaves
    } else {
      EXPECT_EQ(CheckpointStore::latest(dir.path()), dir / "step_00000002");
      fs::remove_all(dir / "step_00000002");
    }
  }
  // The next save cleans the debris and completes.
  CheckpointStore store(options_for(dir.path(), 3));
  store.save(second);
  EXPECT_EQ(CheckpointStore::latest(dir.path()), dir / "step_00000002");
  EXPECT_EQ(CheckpointStore::whole_steps(dir.path()), (std::vector<int64_t>{1, 2}));
  for (const auto& entry : fs::directory_iterator(dir.path()))
    EXPECT_NE(entry.path().filename().string()[0], '.') << entry.path();
  expect_same(CheckpointStore::load(dir / "step_00000002").model, second.model);
}

TEST(CheckpointStore, RetentionKeepsTheLastKAndEveryMth) {
  TempDir dir;
  CheckpointStore store(options_for(dir.path(), 3, 5));
  EXPECT_FALSE(CheckpointStore::latest(dir.path()).has_value());
  const CheckpointContents c = make_contents(0);
  for (int64_t step = 1; step <= 12; ++step) {
    CheckpointContents s = c;
    s.state.step = step;
    store.save(s);
  }
  EXPECT_EQ(CheckpointStore::whole_steps(dir.path()), (std::vector<int64_t>{5, 10, 11, 12}));
  // Re-saving an older step (a resumed run) keeps it, and replaces it whole.
  CheckpointContents old = c;
  old.state.step = 7;
  old.state.data.consumed_samples = 777;
  store.save(old);
  old.state.data.consumed_samples = 778;
  store.save(old);
  EXPECT_EQ(CheckpointStore::whole_steps(dir.path()), (std::vector<int64_t>{5, 7, 10, 11, 12}));
  EXPECT_EQ(CheckpointStore::load(dir / "step_00000007").state.data.consumed_samples, 778);
  EXPECT_EQ(CheckpointStore::latest(dir.path()), dir / "step_00000012");

  TempDir all;
  CheckpointStore keep_all(options_for(all.path(), 0, 0));
  for (int64_t step = 1; step <= 4; ++step) {
    CheckpointContents s = c;
    s.state.step = step;
    keep_all.save(s);
  }
  EXPECT_EQ(CheckpointStore::whole_steps(all.path()), (std::vector<int64_t>{1, 2, 3, 4}));
  EXPECT_TRUE(store.due(20000) && !store.due(20001));
}

}  // namespace
}  // namespace tupe::checkpoint
