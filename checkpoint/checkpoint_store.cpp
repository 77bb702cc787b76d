#include "checkpoint/checkpoint_store.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "checkpoint/durable_io.h"
#include "checkpoint/json_brief.h"
#include "checkpoint/safetensors.h"
#include "common/error.h"
#include "common/sha256.h"

namespace tupe::checkpoint {

namespace fs = std::filesystem;

namespace {

constexpr char kManifestFormat[] = "tupe-checkpoint";
/// 1: "files" maps names to byte counts; 2: to {"bytes", "sha256"}. Both are read.
constexpr int64_t kManifestFormatVersion = 2;
constexpr char kModelFile[] = "model.safetensors";
constexpr char kOptimizerFile[] = "optimizer.safetensors";
constexpr char kStateFile[] = "trainer_state.json";
constexpr char kManifestFile[] = "manifest.json";
constexpr char kTempPrefix[] = ".tmp-";
constexpr char kTrashPrefix[] = ".trash-";
constexpr char kStepPrefix[] = "step_";

/// The step of a folder named step_<8+ digits>, or -1.
int64_t parse_step_name(const std::string& name) {
  const size_t prefix = sizeof(kStepPrefix) - 1;
  if (name.size() < prefix + 8 || name.compare(0, prefix, kStepPrefix) != 0 || name.size() > prefix + 18) return -1;
  int64_t step = 0;
  for (size_t i = prefix; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9') return -1;
    step = step * 10 + (name[i] - '0');
  }
  return step;
}

/// One file as the manifest lists it.
struct ManifestFile {
  std::string name;
  uint64_t size_bytes = 0;
  std::string sha256;  ///< lower-case hex; "" in a version-1 manifest (sizes only)
};

/// What a manifest says about its checkpoint.
struct Manifest {
  int64_t step = 0;
  std::vector<ManifestFile> files;
};

/// Parses <checkpoint>/manifest.json and checks it against the files' sizes (cheap: no file
/// contents are read). Throws tupe::Error naming the file and the cause.
/// A carried vocabulary: a plain name other than the checkpoint's own files, bytes whose
/// SHA-256 is the state's vocab_sha256. Throws tupe::Error "<where>: ...".
void check_carried_vocab(const CheckpointContents& c, const std::string& where) {
  if (!c.state.tokenizer || c.state.tokenizer->vocab_file.empty()) {
    TUPE_CHECK(c.vocab_bytes.empty(), where << ": vocabulary bytes given but no tokenizer.vocab_file names them");
    return;
  }
  const std::string& name = c.state.tokenizer->vocab_file;
  for (const char* reserved : {kModelFile, kOptimizerFile, kStateFile, kManifestFile})
    TUPE_CHECK(name != reserved, where << ": tokenizer.vocab_file '" << name << "' is a name the checkpoint uses");
  TUPE_CHECK(name.find('/') == std::string::npos && name != "." && name != "..",
             where << ": tokenizer.vocab_file '" << name << "' is not a plain file name");
  const std::string actual = sha256_hex(c.vocab_bytes);
  TUPE_CHECK(actual == c.state.vocab_sha256, where << ": vocabulary SHA-256 " << actual << " differs from vocab_sha256 "
                                                   << c.state.vocab_sha256);
}

Manifest validate_manifest(const fs::path& checkpoint) {
  const fs::path manifest_path = checkpoint / kManifestFile;
  const std::string where = manifest_path.string();
  std::error_code ec;
  TUPE_CHECK(fs::is_regular_file(manifest_path, ec), where << ": missing (the checkpoint is incomplete)");
  nlohmann::json m;
  try {
    m = nlohmann::json::parse(read_file_bytes(manifest_path));
  } catch (const nlohmann::json::parse_error& e) {
    TUPE_FAIL(where << ": not valid JSON at byte " << e.byte);
  } catch (const nlohmann::json::exception& e) {  // e.g. a number beyond double's range
    TUPE_FAIL(where << ": unreadable JSON (" << e.what() << ")");
  }
  TUPE_CHECK(m.is_object() && m.contains("format") && m["format"] == kManifestFormat,
             where << ": key 'format': expected '" << kManifestFormat << "'");
  const bool known_version = m.contains("format_version") && m["format_version"].is_number_integer() &&
                             m["format_version"].get<int64_t>() >= 1 &&
                             m["format_version"].get<int64_t>() <= kManifestFormatVersion;
  TUPE_CHECK(known_version, where << ": key 'format_version': expected 1 to " << kManifestFormatVersion << ", got "
                                  << (m.contains("format_version") ? json_brief(m["format_version"]) : "(absent)"));
  const int64_t version = m["format_version"].get<int64_t>();
  TUPE_CHECK(m.contains("step") && m["step"].is_number_unsigned(), where << ": key 'step': missing or not an integer >= 0");
  Manifest out;
  out.step = m["step"].get<int64_t>();
  const int64_t named_step = parse_step_name(checkpoint.filename().string());
  TUPE_CHECK(named_step < 0 || named_step == out.step,
             where << ": key 'step': " << out.step << " disagrees with the folder name " << checkpoint.filename().string());
  TUPE_CHECK(m.contains("files") && m["files"].is_object(), where << ": key 'files': missing or not an object");
  for (const char* required : {kModelFile, kOptimizerFile, kStateFile})
    TUPE_CHECK(m["files"].contains(required), where << ": key 'files." << required << "': missing");
  for (const auto& [name, entry] : m["files"].items()) {
    const std::string key = "key 'files." + name + "'";
    TUPE_CHECK(name.find('/') == std::string::npos && name != "." && name != "..",
               where << ": " << key << ": not a plain file name");
    ManifestFile f;
    f.name = name;
    if (version == 1) {  // "name": <bytes>
      TUPE_CHECK(entry.is_number_unsigned(), where << ": " << key << ": expected a byte count");
      f.size_bytes = entry.get<uint64_t>();
    } else {  // "name": {"bytes": <bytes>, "sha256": "<64 hex>"}
      TUPE_CHECK(entry.is_object() && entry.contains("bytes") && entry["bytes"].is_number_unsigned(),
                 where << ": " << key << ": expected {\"bytes\": <count>, \"sha256\": <hex>}");
      f.size_bytes = entry["bytes"].get<uint64_t>();
      TUPE_CHECK(entry.contains("sha256") && entry["sha256"].is_string() &&
                     entry["sha256"].get<std::string>().size() == 64,
                 where << ": " << key << ": 'sha256' is missing or not 64 hex digits");
      f.sha256 = entry["sha256"].get<std::string>();
    }
    const fs::path file = checkpoint / name;
    const uint64_t actual = fs::file_size(file, ec);
    TUPE_CHECK(!ec, file.string() << ": listed in the manifest but unreadable: " << ec.message());
    TUPE_CHECK(actual == f.size_bytes, file.string() << ": " << actual << " bytes, the manifest says " << f.size_bytes
                                                     << " (damaged checkpoint)");
    out.files.push_back(std::move(f));
  }
  return out;
}

/// Re-hashes every file the manifest gives a digest for (reads all of them). Throws
/// tupe::Error "<file>: SHA-256 <actual> differs from the manifest's <expected> (damaged
/// checkpoint)".
void verify_contents(const fs::path& checkpoint, const Manifest& manifest) {
  for (const ManifestFile& f : manifest.files) {
    if (f.sha256.empty()) continue;
    const fs::path file = checkpoint / f.name;
    const std::string actual = file_sha256_hex(file.string());
    TUPE_CHECK(actual == f.sha256, file.string() << ": SHA-256 " << actual << " differs from the manifest's "
                                                 << f.sha256 << " (damaged checkpoint)");
  }
}

/// Folders under `dir` named like checkpoints, newest step first (nothing validated).
std::vector<std::pair<int64_t, fs::path>> checkpoint_candidates(const fs::path& dir) {
  std::vector<std::pair<int64_t, fs::path>> candidates;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return candidates;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const int64_t step = parse_step_name(entry.path().filename().string());
    if (step >= 0 && entry.is_directory(ec)) candidates.emplace_back(step, entry.path());
  }
  std::sort(candidates.begin(), candidates.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  return candidates;
}

bool is_whole(const fs::path& checkpoint) {
  try {
    validate_manifest(checkpoint);
    return true;
  } catch (const Error&) {
    return false;
  } catch (const nlohmann::json::exception&) {
    return false;
  }
}

/// Removes a folder tree; first renames it to <dir>/.trash-<name> so that a crash midway
/// never leaves something that looks like a checkpoint.
void remove_checkpoint_dir(const fs::path& path) {
  const fs::path trash = path.parent_path() / (kTrashPrefix + path.filename().string());
  std::error_code ec;
  fs::remove_all(trash, ec);
  fs::rename(path, trash, ec);
  TUPE_CHECK(!ec, path.string() << ": cannot move aside for deletion: " << ec.message());
  fs::remove_all(trash, ec);
  TUPE_CHECK(!ec, trash.string() << ": cannot delete: " << ec.message());
}

}  // namespace

CheckpointStore::CheckpointStore(CheckpointOptions options) : options_(std::move(options)) {
  options_.validate();
  if (const char* env = std::getenv("TUPE_TEST_CRASH_AFTER_FILES")) {
    crash_after_files_ = static_cast<int>(parse_int("TUPE_TEST_CRASH_AFTER_FILES", env));
  }
}

void CheckpointStore::check_writable() const {
  const fs::path dir = options_.dir;
  std::error_code ec;
  fs::create_directories(dir, ec);
  TUPE_CHECK(!ec, dir.string() << ": cannot create the checkpoint folder: " << ec.message());
  // A .tmp- name: if a crash leaves it behind, the next save removes it with the other leftovers.
  const fs::path probe = dir / (std::string(kTempPrefix) + "probe");
  try {
    write_file_atomic(probe, "probe\n");
  } catch (const Error& e) {
    TUPE_FAIL(dir.string() << ": cannot write in the checkpoint folder: " << e.what());
  }
  fs::remove(probe, ec);
}

bool CheckpointStore::due(int64_t step) const { return options_.every_steps > 0 && step % options_.every_steps == 0; }

fs::path CheckpointStore::checkpoint_path(const fs::path& dir, int64_t step) {
  TUPE_CHECK(step >= 0, "checkpoint: step must be >= 0, got " << step);
  char name[32];
  std::snprintf(name, sizeof(name), "%s%08lld", kStepPrefix, static_cast<long long>(step));
  return dir / name;
}

void CheckpointStore::after_file_written(int files_written) const {
  if (crash_after_files_ > 0 && files_written == crash_after_files_) {
    std::fflush(nullptr);
    std::_Exit(kCrashInjectionExitCode);  // simulates a crash: no destructors, no cleanup
  }
}

fs::path CheckpointStore::save(const CheckpointContents& contents) {
  const int64_t step = contents.state.step;
  const fs::path dir = options_.dir;
  // Refuse what load() would reject, before touching the disk.
  const std::string state_json = trainer_state_to_json(contents.state);
  const std::string vocab_file = contents.state.tokenizer ? contents.state.tokenizer->vocab_file : std::string();
  check_carried_vocab(contents, "checkpoint step " + std::to_string(step) + " (not saved)");
  trainer_state_from_json(state_json, "checkpoint step " + std::to_string(step) + " trainer state (not saved)");
  const fs::path final_path = checkpoint_path(dir, step);
  std::error_code ec;
  const bool created = fs::create_directories(dir, ec);
  TUPE_CHECK(!ec, dir.string() << ": cannot create the checkpoint folder: " << ec.message());
  if (created) {  // make the new folder's own entry durable too
    fs::path absolute = fs::absolute(dir);
    if (!absolute.has_filename()) absolute = absolute.parent_path();  // "runs/ckpt/" -> "runs/ckpt"
    fsync_directory(absolute.parent_path());
  }
  // Leftovers of an interrupted save or deletion (only one process writes to a store).
  std::vector<fs::path> leftovers;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(kTempPrefix, 0) == 0 || name.rfind(kTrashPrefix, 0) == 0) leftovers.push_back(entry.path());
  }
  for (const fs::path& p : leftovers) fs::remove_all(p, ec);
  const fs::path temp = dir / (kTempPrefix + final_path.filename().string());
  fs::create_directory(temp, ec);
  TUPE_CHECK(!ec, temp.string() << ": cannot create: " << ec.message());
  const fs::path trash = dir / (kTrashPrefix + final_path.filename().string());
  try {
    write_safetensors(temp / kModelFile, contents.model, {{"format", "pt"}, {"step", std::to_string(step)}});
    after_file_written(1);
    write_safetensors(temp / kOptimizerFile, contents.optimizer.tensors, contents.optimizer.metadata);
    after_file_written(2);
    if (!vocab_file.empty()) write_file_atomic(temp / vocab_file, contents.vocab_bytes);
    write_file_atomic(temp / kStateFile, state_json);
    after_file_written(3);
    nlohmann::ordered_json manifest;
    manifest["format"] = kManifestFormat;
    manifest["format_version"] = kManifestFormatVersion;
    manifest["step"] = step;
    manifest["files"] = nlohmann::ordered_json::object();
    std::vector<std::string> names = {kModelFile, kOptimizerFile, kStateFile};
    if (!vocab_file.empty()) names.push_back(vocab_file);
    for (const std::string& name : names) {
      const uint64_t size_bytes = fs::file_size(temp / name, ec);
      TUPE_CHECK(!ec, (temp / name).string() << ": cannot stat after writing: " << ec.message());
      // Read back from the page cache just after the fsync: the digest of what was written.
      manifest["files"][name] = {{"bytes", size_bytes}, {"sha256", file_sha256_hex((temp / name).string())}};
    }
    write_file_atomic(temp / kManifestFile, manifest.dump(2) + "\n");
    after_file_written(4);
    if (fs::exists(final_path)) {
      fs::rename(final_path, trash, ec);
      TUPE_CHECK(!ec, final_path.string() << ": cannot move the old checkpoint of this step aside: " << ec.message());
    }
    durable_rename(temp, final_path);
  } catch (...) {
    fs::remove_all(temp, ec);
    if (fs::exists(trash) && !fs::exists(final_path)) fs::rename(trash, final_path, ec);
    throw;
  }
  fs::remove_all(trash, ec);
  after_file_written(5);
  apply_retention(step);
  return final_path;
}

CheckpointContents CheckpointStore::load(const fs::path& checkpoint_dir, Hashes hashes) {
  std::error_code ec;
  TUPE_CHECK(fs::is_directory(checkpoint_dir, ec),
             checkpoint_dir.string() << ": " << (fs::exists(checkpoint_dir, ec) ? "not a folder" : "no such folder")
                                     << " (a checkpoint is a step_<N> folder)");
  if (!fs::exists(checkpoint_dir / kManifestFile, ec)) {
    const auto inside = checkpoint_candidates(checkpoint_dir);
    TUPE_CHECK(inside.empty(), checkpoint_dir.string()
                                   << ": holds checkpoint folders (newest " << inside.front().second.filename().string()
                                   << ") but is not one itself: pass one of them, or this folder as checkpoint.dir "
                                      "with --resume auto");
  }
  const Manifest manifest = validate_manifest(checkpoint_dir);
  if (hashes == Hashes::kVerify) verify_contents(checkpoint_dir, manifest);
  const int64_t step = manifest.step;
  CheckpointContents out;
  out.model = read_safetensors(checkpoint_dir / kModelFile).tensors;
  SafetensorsContents optimizer = read_safetensors(checkpoint_dir / kOptimizerFile);
  out.optimizer.tensors = std::move(optimizer.tensors);
  out.optimizer.metadata = std::move(optimizer.metadata);
  const fs::path state_path = checkpoint_dir / kStateFile;
  out.state = trainer_state_from_json(read_file_bytes(state_path), state_path.string());
  TUPE_CHECK(out.state.step == step, state_path.string() << ": key 'step': " << out.state.step
                                                         << " disagrees with the manifest's " << step);
  if (out.state.tokenizer && !out.state.tokenizer->vocab_file.empty()) {
    const std::string& name = out.state.tokenizer->vocab_file;
    const bool listed = std::any_of(manifest.files.begin(), manifest.files.end(),
                                    [&](const ManifestFile& f) { return f.name == name; });
    TUPE_CHECK(listed, state_path.string() << ": key 'tokenizer.vocab_file': '" << name
                                           << "' is not listed in the manifest (damaged checkpoint)");
    out.vocab_bytes = read_file_bytes(checkpoint_dir / name);
    check_carried_vocab(out, (checkpoint_dir / name).string());
  }
  return out;
}

std::vector<std::string> CheckpointStore::verify_files(const fs::path& checkpoint_dir, int64_t* bytes) {
  std::vector<std::string> problems;
  if (bytes) *bytes = 0;
  Manifest manifest;
  try {
    manifest = validate_manifest(checkpoint_dir);
  } catch (const Error& e) {
    problems.emplace_back(e.what());
    return problems;
  } catch (const nlohmann::json::exception& e) {
    problems.push_back((checkpoint_dir / kManifestFile).string() + ": unreadable JSON (" + e.what() + ")");
    return problems;
  }
  for (const ManifestFile& f : manifest.files) {
    if (f.sha256.empty()) continue;  // a version-1 manifest: sizes only, checked above
    const fs::path file = checkpoint_dir / f.name;
    try {
      const std::string actual = file_sha256_hex(file.string());
      if (bytes) *bytes += static_cast<int64_t>(f.size_bytes);
      if (actual != f.sha256)
        problems.push_back(file.string() + ": SHA-256 " + actual + " differs from the manifest's " + f.sha256 +
                           " (damaged checkpoint)");
    } catch (const Error& e) {
      problems.emplace_back(e.what());
    }
  }
  return problems;
}

bool CheckpointStore::is_checkpoint_folder(const fs::path& path) {
  std::error_code ec;
  return fs::is_directory(path, ec) && fs::exists(path / kManifestFile, ec);
}

fs::path CheckpointStore::resolve(const fs::path& path) {
  TUPE_CHECK(!path.empty(), "checkpoint: no path given");
  std::error_code ec;
  TUPE_CHECK(!fs::exists(path, ec) || fs::is_directory(path, ec),
             path.string() << ": a file, not a checkpoint folder (give a step_<N> folder, or the folder that holds "
                              "them)");
  TUPE_CHECK(fs::is_directory(path, ec), path.string() << ": no such checkpoint folder");
  if (fs::exists(path / kManifestFile, ec)) return path;
  const auto newest = latest(path);
  TUPE_CHECK(newest.has_value(), path.string() << ": holds no whole checkpoint (no manifest.json, no whole step_<N> "
                                                  "folder)");
  return *newest;
}

std::vector<int64_t> CheckpointStore::whole_steps(const fs::path& dir) {
  std::vector<int64_t> steps;
  for (const auto& [step, path] : checkpoint_candidates(dir))
    if (is_whole(path)) steps.push_back(step);
  std::reverse(steps.begin(), steps.end());  // ascending
  return steps;
}

std::optional<fs::path> CheckpointStore::latest(const fs::path& dir) {
  for (const auto& [step, path] : checkpoint_candidates(dir))  // validate only until the first whole one
    if (is_whole(path)) return path;
  return std::nullopt;
}

std::optional<LoadedCheckpoint> CheckpointStore::load_latest(const fs::path& dir, std::vector<std::string>* skipped,
                                                             Hashes hashes) {
  // A save renames a whole .tmp- folder into place, so a step_<N> folder that is not whole
  // was damaged afterwards: it is reported like any other load failure.
  for (const auto& [step, path] : checkpoint_candidates(dir)) {
    try {
      return LoadedCheckpoint{path, load(path, hashes)};
    } catch (const Error& e) {
      if (skipped) skipped->push_back(e.what());
    }
  }
  return std::nullopt;
}

void CheckpointStore::apply_retention(int64_t keep_step) const {
  if (options_.keep_last == 0) return;
  const std::vector<int64_t> steps = whole_steps(options_.dir);
  std::set<int64_t> keep{keep_step};
  const size_t keep_last = static_cast<size_t>(options_.keep_last);
  for (size_t i = steps.size() > keep_last ? steps.size() - keep_last : 0; i < steps.size(); ++i) keep.insert(steps[i]);
  for (int64_t s : steps)
    if (options_.keep_every > 0 && s > 0 && s % options_.keep_every == 0) keep.insert(s);
  bool removed = false;
  for (int64_t s : steps)
    if (!keep.count(s)) {
      remove_checkpoint_dir(checkpoint_path(options_.dir, s));
      removed = true;
    }
  if (removed) fsync_directory(options_.dir);
}

void check_config_compatible(const KeyValues& saved, const KeyValues& current, const std::vector<std::string>& must_match,
                             const std::string& where) {
  std::vector<std::string> diffs;
  for (const std::string& key : must_match) {
    auto s = saved.find(key);
    auto c = current.find(key);
    const bool has_s = s != saved.end(), has_c = c != current.end();
    if (!has_s && !has_c) continue;
    if (has_s && has_c && s->second == c->second) continue;
    diffs.push_back(key + ": saved " + (has_s ? "'" + s->second + "'" : "(absent)") + ", current " +
                    (has_c ? "'" + c->second + "'" : "(absent)"));
  }
  if (diffs.empty()) return;
  std::ostringstream os;
  for (size_t i = 0; i < diffs.size(); ++i) os << (i ? "; " : "") << diffs[i];
  TUPE_FAIL(where << ": the checkpoint's config differs from the current one in " << diffs.size()
                  << " key(s) that must match: " << os.str());
}

}  // namespace tupe::checkpoint
