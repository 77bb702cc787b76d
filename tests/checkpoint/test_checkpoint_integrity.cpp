// The checkpoint store against damage: latest() skips incomplete or damaged folders, the
// manifest holds the SHA-256 of every file (checked against coreutils' sha256sum) and a
// changed byte is refused while load_latest() falls back past it, version-1 manifests (sizes
// only) still load, the config check lists every differing key, and untrusted JSON gives
// one-line errors, never a crash.
#include <nlohmann/json.hpp>

#include "tests/checkpoint/checkpoint_store_fixtures.h"

namespace tupe::checkpoint {
namespace {

namespace fs = std::filesystem;
using namespace testing;  // NOLINT: the fixtures of this folder

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
