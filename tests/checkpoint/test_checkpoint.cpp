// The checkpoint store: bitwise round trip (weights, optimizer state, steps, scaler, RNG,
// data position, config), a crash between files (a forked child killed by the fault
// injection) leaves the previous checkpoint as latest(), retention keeps exactly the right
// steps, latest() skips incomplete or damaged folders, the manifest's SHA-256 of every file
// (checked against coreutils' sha256sum) catches a changed byte, load_latest() falls back
// past it, version-1 manifests (sizes only) still load, and the config check lists every
// differing key.
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <torch/version.h>

#include "checkpoint/checkpoint_store.h"
#include "checkpoint/durable_io.h"
#include "checkpoint/safetensors.h"
#include "common/error.h"
#include "tests/checkpoint/checkpoint_test_util.h"
#include "trainer/optimizer.h"

namespace tupe::checkpoint {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

/// A checkpoint with recognisable contents for step `step`.
CheckpointContents make_contents(int64_t step) {
  at::manual_seed(1000 + step);
  CheckpointContents c;
  c.model = {{"encoder.embeddings.word.weight", at::randn({11, 4})},
             {"encoder.layers.0.attention.query.bias", at::randn({4}).to(at::kHalf)},
             {"mlm_head.bias", at::randn({11}).to(at::kBFloat16)},
             {"encoder.positional.relative_bias.weight", at::randn({33, 2}, at::kDouble)}};
  NamedTensors params;
  for (const auto& [name, t] : c.model)
    if (t.scalar_type() == at::kFloat) params.emplace_back(name, t.clone());
  trainer::OptimizerOptions oo;
  trainer::AdamW opt(params, oo);
  for (auto& [name, p] : params) p.mutable_grad() = at::randn_like(p);
  opt.step(1e-3);
  c.optimizer = opt.state_dict();
  c.state.step = step;
  c.state.scheduler_step = std::max<int64_t>(step - 1, 0);
  c.state.loss_scaler = {0.1 * step, 7, 1, 3};  // 0.1 * step: not a power of two, still exact in JSON
  c.state.data = {2, 12345 + step};
  c.state.config = {{"model.hidden_size", "4"}, {"optimizer.lr", "0.0001"}, {"run.note", "a \"quoted\" value"}};
  c.state.vocab_sha256 = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";
  c.state.world_size = 8;
  return c;
}

void expect_same(const NamedTensors& a, const NamedTensors& b) {
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [name, t] : a) {
    const at::Tensor other = find_tensor(b, name);
    ASSERT_TRUE(other.defined()) << name;
    EXPECT_TRUE(testing::bitwise_equal(t, other)) << name;
  }
}

/// SHA-256 of a file by coreutils' sha256sum: an implementation independent of ours.
std::string sha256sum(const fs::path& file) {
  const std::string cmd = "sha256sum '" + file.string() + "'";
  FILE* pipe = ::popen(cmd.c_str(), "r");
  if (!pipe) return "popen failed";
  char hex[65] = {0};
  const size_t got = std::fread(hex, 1, 64, pipe);
  ::pclose(pipe);
  return std::string(hex, got);
}

/// Flips one bit of the byte `from_end` bytes before the end of `file` (size unchanged).
void flip_byte(const fs::path& file, uint64_t from_end) {
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  const auto pos = static_cast<std::streamoff>(fs::file_size(file) - from_end);
  f.seekg(pos);
  char c = 0;
  f.read(&c, 1);
  f.seekp(pos);
  c = static_cast<char>(c ^ 0x10);
  f.write(&c, 1);
}

/// SHA-256 of `bytes` by coreutils' sha256sum (written to a scratch file under `dir`).
std::string sha256sum_of_bytes(const fs::path& dir, const std::string& bytes) {
  const fs::path f = dir / "scratch-bytes";
  write_file_atomic(f, bytes);
  const std::string hex = sha256sum(f);
  fs::remove(f);
  return hex;
}

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return std::string();
}

std::string load_error(const fs::path& p) {
  try {
    CheckpointStore::load(p);
  } catch (const Error& e) {
    return std::string(e.what());
  }
  return std::string();
}

CheckpointOptions options_for(const fs::path& dir, int64_t keep_last = 0, int64_t keep_every = 0) {
  CheckpointOptions o;
  o.dir = dir.string();
  o.keep_last = keep_last;
  o.keep_every = keep_every;
  return o;
}

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

TEST(CheckpointStore, LatestSkipsIncompleteAndDamagedFolders) {
  TempDir dir;
  CheckpointStore store(options_for(dir.path()));
  for (int64_t step : {3, 4, 5, 6}) store.save(make_contents(step));
  // 6: no manifest; 5: a file shorter than the manifest says; 4: manifest not JSON.
  fs::remove(dir / "step_00000006" / "manifest.json");
  fs::resize_file(dir / "step_00000005" / "model.safetensors", fs::file_size(dir / "step_00000005" / "model.safetensors") - 4);
  write_file_atomic(dir / "step_00000004" / "manifest.json", "{not json");
  fs::create_directory(dir / ".tmp-step_00000009");
  fs::create_directory(dir / "step_0000007");  // 7 digits: not a checkpoint name
  EXPECT_EQ(CheckpointStore::latest(dir.path()), dir / "step_00000003");
  EXPECT_EQ(CheckpointStore::whole_steps(dir.path()), std::vector<int64_t>{3});

  const std::string e5 = load_error(dir / "step_00000005");
  EXPECT_NE(e5.find("model.safetensors: "), std::string::npos) << e5;
  EXPECT_NE(e5.find("the manifest says"), std::string::npos) << e5;
  EXPECT_NE(load_error(dir / "step_00000006").find("manifest.json: missing"), std::string::npos);
  // A damaged trainer_state.json (valid manifest sizes) names the key.
  const fs::path state = dir / "step_00000003" / "trainer_state.json";
  std::string text = read_file_bytes(state);
  const size_t pos = text.find("\"consumed_samples\"");
  ASSERT_NE(pos, std::string::npos);
  text.replace(pos, 18, "\"consumed_sampleX\"");
  write_file_atomic(state, text);
  const std::string e3 = load_error(dir / "step_00000003");
  EXPECT_NE(e3.find("trainer_state.json: SHA-256"), std::string::npos) << e3;
  // With the manifest's digest updated too (a consistent but wrong file), the key is named.
  const fs::path manifest_path = dir / "step_00000003" / "manifest.json";
  auto manifest = nlohmann::json::parse(read_file_bytes(manifest_path));
  manifest["files"]["trainer_state.json"]["sha256"] = sha256sum(state);
  write_file_atomic(manifest_path, manifest.dump());
  const std::string e3b = load_error(dir / "step_00000003");
  EXPECT_NE(e3b.find("key 'data_position.consumed_samples': missing"), std::string::npos) << e3b;
  EXPECT_EQ(e3b.find('\n'), std::string::npos);
}

TEST(CheckpointStore, ManifestHoldsTheSha256OfEveryFile) {
  TempDir dir;
  CheckpointStore store(options_for(dir.path()));
  const fs::path ck = store.save(make_contents(7));
  const auto manifest = nlohmann::json::parse(read_file_bytes(ck / "manifest.json"));
  EXPECT_EQ(manifest["format_version"], 2);
  ASSERT_EQ(manifest["files"].size(), 3u);
  for (const char* name : {"model.safetensors", "optimizer.safetensors", "trainer_state.json"}) {
    const auto& entry = manifest["files"][name];
    EXPECT_EQ(entry["bytes"].get<uint64_t>(), fs::file_size(ck / name)) << name;
    const std::string expected = sha256sum(ck / name);
    ASSERT_EQ(expected.size(), 64u) << "sha256sum gave '" << expected << "'";
    EXPECT_EQ(entry["sha256"].get<std::string>(), expected) << name;
  }
}

TEST(CheckpointStore, ChangedByteIsRefusedAndLoadLatestFallsBack) {
  TempDir dir;
  CheckpointStore store(options_for(dir.path()));
  for (int64_t step : {3, 4, 5}) store.save(make_contents(step));
  flip_byte(dir / "step_00000005" / "model.safetensors", 2);      // inside the last tensor's data
  flip_byte(dir / "step_00000004" / "optimizer.safetensors", 40);  // another file, another place
  // Sizes still agree: the cheap check keeps listing them; loading reads every byte.
  EXPECT_EQ(CheckpointStore::latest(dir.path()), dir / "step_00000005");
  const std::string e5 = load_error(dir / "step_00000005");
  EXPECT_NE(e5.find((dir / "step_00000005" / "model.safetensors").string() + ": SHA-256"), std::string::npos) << e5;
  EXPECT_NE(e5.find("differs from the manifest's"), std::string::npos) << e5;
  EXPECT_EQ(e5.find('\n'), std::string::npos);

  std::vector<std::string> skipped;
  const auto loaded = CheckpointStore::load_latest(dir.path(), &skipped);
  ASSERT_TRUE(loaded.has_value());
  EXPECT_EQ(loaded->dir, dir / "step_00000003");
  EXPECT_EQ(loaded->contents.state.step, 3);
  expect_same(loaded->contents.model, make_contents(3).model);
  ASSERT_EQ(skipped.size(), 2u);
  EXPECT_NE(skipped[0].find("step_00000005/model.safetensors: SHA-256"), std::string::npos) << skipped[0];
  EXPECT_NE(skipped[1].find("step_00000004/optimizer.safetensors: SHA-256"), std::string::npos) << skipped[1];

  // A folder that fails the cheap check too (a truncated file, no manifest) is reported,
  // not passed over in silence: saves are atomic, so it was damaged after its save.
  store.save(make_contents(6));
  fs::resize_file(dir / "step_00000006" / "model.safetensors", 10);
  skipped.clear();
  EXPECT_EQ(CheckpointStore::load_latest(dir.path(), &skipped)->dir, dir / "step_00000003");
  ASSERT_EQ(skipped.size(), 3u);
  EXPECT_NE(skipped[0].find("step_00000006/model.safetensors: 10 bytes, the manifest says"), std::string::npos)
      << skipped[0];

  flip_byte(dir / "step_00000003" / "trainer_state.json", 5);
  skipped.clear();
  EXPECT_FALSE(CheckpointStore::load_latest(dir.path(), &skipped).has_value());
  EXPECT_EQ(skipped.size(), 4u);
  EXPECT_FALSE(CheckpointStore::load_latest(dir.path() / "absent", nullptr).has_value());

  // Paths that are no checkpoint say what they are.
  EXPECT_NE(load_error(dir / "absent").find("absent: no such folder"), std::string::npos) << load_error(dir / "absent");
  EXPECT_NE(load_error(dir / "step_00000003" / "manifest.json").find("manifest.json: not a folder"), std::string::npos);
  const std::string parent = load_error(dir.path());
  EXPECT_NE(parent.find("holds checkpoint folders (newest step_00000006) but is not one itself"), std::string::npos)
      << parent;
}

TEST(CheckpointStore, Version1ManifestWithSizesOnlyStillLoads) {
  TempDir dir;
  CheckpointStore store(options_for(dir.path()));
  const CheckpointContents saved = make_contents(9);
  const fs::path ck = store.save(saved);
  nlohmann::ordered_json v1;
  v1["format"] = "tupe-checkpoint";
  v1["format_version"] = 1;
  v1["step"] = 9;
  for (const char* name : {"model.safetensors", "optimizer.safetensors", "trainer_state.json"})
    v1["files"][name] = fs::file_size(ck / name);
  write_file_atomic(ck / "manifest.json", v1.dump(2));
  const CheckpointContents back = CheckpointStore::load(ck);
  expect_same(back.model, saved.model);
  EXPECT_EQ(back.state.step, 9);
  v1["format_version"] = 3;
  write_file_atomic(ck / "manifest.json", v1.dump(2));
  EXPECT_NE(load_error(ck).find("key 'format_version': expected 1 to 2, got 3"), std::string::npos) << load_error(ck);
}

TEST(CheckpointStore, ConfigCheckListsEveryDifferingKey) {
  const KeyValues saved = {{"model.hidden_size", "768"},     {"model.num_layers", "12"},
                           {"model.position_encoding", "tupe-relative"}, {"model.untie_cls", "true"},
                           {"optimizer.lr", "0.0001"},       {"vocab_sha256", "aaaa"}};
  const KeyValues current = {{"model.hidden_size", "512"},
                             {"model.num_layers", "12"},
                             {"model.position_encoding", "bert-absolute"},
                             {"optimizer.lr", "0.0002"},
                             {"vocab_sha256", "bbbb"}};
  const std::vector<std::string> must_match = {"model.hidden_size", "model.num_layers", "model.position_encoding",
                                               "model.untie_cls", "vocab_sha256", "model.not_anywhere"};
  try {
    check_config_compatible(saved, current, must_match, "runs/x/step_00000100");
    FAIL() << "mismatch not reported";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.rfind("runs/x/step_00000100: ", 0), 0u) << msg;
    EXPECT_NE(msg.find("in 4 key(s)"), std::string::npos) << msg;
    EXPECT_NE(msg.find("model.hidden_size: saved '768', current '512'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("model.position_encoding: saved 'tupe-relative', current 'bert-absolute'"), std::string::npos);
    EXPECT_NE(msg.find("model.untie_cls: saved 'true', current (absent)"), std::string::npos) << msg;
    EXPECT_NE(msg.find("vocab_sha256: saved 'aaaa', current 'bbbb'"), std::string::npos) << msg;
    EXPECT_EQ(msg.find("num_layers"), std::string::npos) << msg;  // equal
    EXPECT_EQ(msg.find("optimizer.lr"), std::string::npos) << msg;  // not required to match
    EXPECT_EQ(msg.find('\n'), std::string::npos);
  }
  EXPECT_NO_THROW(check_config_compatible(saved, saved, must_match, "same"));
  TrainerState st;
  st.config = {{"model.hidden_size", "768"}};
  st.vocab_sha256 = "cc";
  EXPECT_EQ(st.compat_kv().at("vocab_sha256"), "cc");
}

}  // namespace
}  // namespace tupe::checkpoint

namespace tupe::checkpoint {
namespace {

// Regressions of fuzz/regressions/ (fuzz_manifest, fuzz_trainer_state, fuzz_safetensors): a
// JSON number beyond double's range escaped as nlohmann's out_of_range (an "internal error"
// without the file, and --resume auto stopped instead of skipping the checkpoint), and a
// value nested deep was dump()ed recursively into the message (stack overflow, SIGSEGV).
TEST(CheckpointStore, UntrustedJsonGivesOneLineErrorsNeverACrash) {
  const std::string deep = std::string(200000, '[') + std::string(200000, ']');
  for (const std::string& text : {std::string(R"({"format": "tupe-trainer-state", "format_version": 1e400})"),
                                  R"({"format": )" + deep + "}"}) {
    try {
      trainer_state_from_json(text, "state.json");
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_EQ(msg.rfind("state.json: ", 0), 0u) << msg;
      EXPECT_LT(msg.size(), 400u) << msg;
    }
  }
  TempDir dir;
  CheckpointStore store(options_for(dir.path()));
  for (int64_t step : {1, 2, 3}) store.save(make_contents(step));
  write_file_atomic(dir / "step_00000003" / "manifest.json",
                    R"({"format": "tupe-checkpoint", "format_version": 2, "step": 1e400})");
  write_file_atomic(dir / "step_00000002" / "manifest.json",
                    R"({"format": "tupe-checkpoint", "format_version": )" + deep + "}");
  const std::string e3 = load_error(dir / "step_00000003"), e2 = load_error(dir / "step_00000002");
  EXPECT_NE(e3.find("manifest.json: unreadable JSON"), std::string::npos) << e3;
  EXPECT_NE(e2.find("key 'format_version': expected 1 to 2, got array of 1 entries"), std::string::npos) << e2;
  EXPECT_EQ(CheckpointStore::latest(dir.path()), dir / "step_00000001");  // both skipped
  // safetensors: the 8-byte header length, then the header.
  for (const std::string& header : {std::string(R"({"w": {"dtype": "F32", "shape": [1e400], "data_offsets": [0, 4]}})"),
                                    R"({"w": {"dtype": "F32", "shape": [)" + deep + R"(], "data_offsets": [0, 4]}})"}) {
    const fs::path file = dir / "bad.safetensors";
    std::string bytes(8, '\0');
    for (int b = 0; b < 8; ++b) bytes[static_cast<size_t>(b)] = static_cast<char>((header.size() >> (8 * b)) & 0xff);
    bytes += header + std::string(4, '\0');
    write_file_atomic(file, bytes);
    try {
      read_safetensors(file);
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(file.string()), std::string::npos) << msg;
      EXPECT_LT(msg.size(), 600u) << msg;
    }
  }
}

}  // namespace
}  // namespace tupe::checkpoint
