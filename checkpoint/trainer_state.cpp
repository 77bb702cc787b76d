#include "checkpoint/trainer_state.h"

#include <nlohmann/json.hpp>

#include "checkpoint/durable_io.h"
#include "checkpoint/json_brief.h"
#include "common/error.h"

namespace tupe::checkpoint {

namespace {

constexpr char kFormatName[] = "tupe-trainer-state";
using Json = nlohmann::ordered_json;

/// Typed access to "a.b" paths with one-line errors naming the key.
class Reader {
 public:
  Reader(const Json& root, std::string where) : root_(root), where_(std::move(where)) {}

  const Json& at(const std::string& dotted) const {
    const Json* node = &root_;
    size_t begin = 0;
    while (true) {
      const size_t dot = dotted.find('.', begin);
      const std::string part = dotted.substr(begin, dot == std::string::npos ? std::string::npos : dot - begin);
      TUPE_CHECK(node->is_object() && node->contains(part), where_ << ": key '" << dotted << "': missing");
      node = &(*node)[part];
      if (dot == std::string::npos) return *node;
      begin = dot + 1;
    }
  }
  int64_t integer(const std::string& key) const {
    const Json& v = at(key);
    TUPE_CHECK(v.is_number_integer(), where_ << ": key '" << key << "': expected an integer, got " << json_brief(v));
    return v.get<int64_t>();
  }
  int64_t non_negative(const std::string& key) const {
    const int64_t v = integer(key);
    TUPE_CHECK(v >= 0, where_ << ": key '" << key << "': must be >= 0, got " << v);
    return v;
  }
  double real(const std::string& key) const {
    const Json& v = at(key);
    TUPE_CHECK(v.is_number(), where_ << ": key '" << key << "': expected a number, got " << json_brief(v));
    return v.get<double>();
  }
  std::string text(const std::string& key) const {
    const Json& v = at(key);
    TUPE_CHECK(v.is_string(), where_ << ": key '" << key << "': expected a string, got " << json_brief(v));
    return v.get<std::string>();
  }
  const std::string& where() const { return where_; }

 private:
  const Json& root_;
  std::string where_;
};

}  // namespace

KeyValues TrainerState::compat_kv() const {
  KeyValues kv = config;
  kv["vocab_sha256"] = vocab_sha256;
  return kv;
}

std::string trainer_state_to_json(const TrainerState& s) {
  Json j;
  j["format"] = kFormatName;
  j["format_version"] = s.format_version;
  j["step"] = s.step;
  j["scheduler_step"] = s.scheduler_step;
  j["world_size"] = s.world_size;
  j["vocab_sha256"] = s.vocab_sha256;
  j["loss_scaler"] = {{"scale", s.loss_scaler.scale},
                      {"growth_tracker", s.loss_scaler.growth_tracker},
                      {"consecutive_skips", s.loss_scaler.consecutive_skips},
                      {"total_skips", s.loss_scaler.total_skips}};
  j["data_position"] = {{"epoch", s.data.epoch}, {"consumed_samples", s.data.consumed_samples}};
  Json config = Json::object();
  for (const auto& [k, v] : s.config) config[k] = v;
  j["config"] = config;
  if (s.tokenizer)
    j["tokenizer"] = {{"kind", s.tokenizer->kind},
                      {"lower_case", s.tokenizer->lower_case},
                      {"vocab_file", s.tokenizer->vocab_file}};
  if (s.origin)
    j["origin"] = {{"format", s.origin->format},
                   {"path", s.origin->path},
                   {"weights_sha256", s.origin->weights_sha256},
                   {"step", s.origin->step},
                   {"architecture", s.origin->architecture},
                   {"position_encoding", s.origin->position_encoding},
                   {"max_positions", s.origin->max_positions}};
  if (!s.build.empty()) {
    Json build = Json::object();
    for (const auto& [k, v] : s.build) build[k] = v;
    j["build"] = build;
  }
  if (!s.attention_kernels.empty()) {
    Json kernels = Json::object();
    for (const auto& [k, v] : s.attention_kernels) kernels[k] = v;
    j["attention_kernels"] = kernels;
  }
  return j.dump(2) + "\n";
}

TrainerState trainer_state_from_json(const std::string& text, const std::string& where) {
  Json root;
  try {
    root = Json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    TUPE_FAIL(where << ": not valid JSON at byte " << e.byte);
  } catch (const nlohmann::json::exception& e) {  // e.g. a number beyond double's range
    TUPE_FAIL(where << ": unreadable JSON (" << e.what() << ")");
  }
  TUPE_CHECK(root.is_object(), where << ": the JSON document is not an object");
  const Reader r(root, where);
  TUPE_CHECK(r.text("format") == kFormatName,
             where << ": key 'format': expected '" << kFormatName << "', got '" << r.text("format") << "'");
  TrainerState s;
  s.format_version = r.integer("format_version");
  TUPE_CHECK(s.format_version >= 1 && s.format_version <= kCheckpointFormatVersion,
             where << ": key 'format_version': " << s.format_version << " is not supported (this build reads 1 to "
                   << kCheckpointFormatVersion << ")");
  s.step = r.non_negative("step");
  s.scheduler_step = r.non_negative("scheduler_step");
  s.world_size = r.integer("world_size");
  TUPE_CHECK(s.world_size >= 1, where << ": key 'world_size': must be >= 1, got " << s.world_size);
  s.vocab_sha256 = r.text("vocab_sha256");
  s.loss_scaler.scale = r.real("loss_scaler.scale");
  s.loss_scaler.growth_tracker = r.non_negative("loss_scaler.growth_tracker");
  s.loss_scaler.consecutive_skips = r.non_negative("loss_scaler.consecutive_skips");
  s.loss_scaler.total_skips = r.non_negative("loss_scaler.total_skips");
  s.data.epoch = r.non_negative("data_position.epoch");
  s.data.consumed_samples = r.non_negative("data_position.consumed_samples");
  const Json& config = r.at("config");
  TUPE_CHECK(config.is_object(), where << ": key 'config': expected an object of strings");
  for (const auto& [k, v] : config.items()) {
    TUPE_CHECK(v.is_string(), where << ": key 'config." << k << "': expected a string, got " << json_brief(v));
    s.config[k] = v.get<std::string>();
  }
  if (root.contains("tokenizer")) {
    TUPE_CHECK(s.format_version >= 2, where << ": key 'tokenizer': not part of format version 1");
    TokenizerRecord t;
    t.kind = r.text("tokenizer.kind");
    TUPE_CHECK(t.kind == "wordpiece" || t.kind == "sentencepiece",
               where << ": key 'tokenizer.kind': expected wordpiece or sentencepiece, got '" << t.kind << "'");
    const Json& lower = r.at("tokenizer.lower_case");
    TUPE_CHECK(lower.is_boolean(), where << ": key 'tokenizer.lower_case': expected true or false, got "
                                         << json_brief(lower));
    t.lower_case = lower.get<bool>();
    t.vocab_file = r.text("tokenizer.vocab_file");
    TUPE_CHECK(t.vocab_file.find('/') == std::string::npos && t.vocab_file != "." && t.vocab_file != "..",
               where << ": key 'tokenizer.vocab_file': '" << t.vocab_file << "' is not a plain file name");
    s.tokenizer = t;
  }
  if (root.contains("origin")) {
    TUPE_CHECK(s.format_version >= 2, where << ": key 'origin': not part of format version 1");
    WeightsOrigin o;
    o.format = r.text("origin.format");
    TUPE_CHECK(o.format == "tupe" || o.format == "hf-bert",
               where << ": key 'origin.format': expected tupe or hf-bert, got '" << o.format << "'");
    o.path = r.text("origin.path");
    o.weights_sha256 = r.text("origin.weights_sha256");
    o.step = r.non_negative("origin.step");
    o.architecture = r.text("origin.architecture");
    o.position_encoding = r.text("origin.position_encoding");
    o.max_positions = r.non_negative("origin.max_positions");
    s.origin = o;
  }
  s.build.clear();
  if (root.contains("build")) {
    const Json& build = root["build"];
    TUPE_CHECK(build.is_object(), where << ": key 'build': expected an object of strings, got " << json_brief(build));
    for (const auto& [k, v] : build.items()) {
      TUPE_CHECK(v.is_string(), where << ": key 'build." << k << "': expected a string, got " << json_brief(v));
      s.build.emplace_back(k, v.get<std::string>());
    }
  }
  if (root.contains("attention_kernels")) {
    const Json& kernels = root["attention_kernels"];
    TUPE_CHECK(kernels.is_object(),
               where << ": key 'attention_kernels': expected an object of strings, got " << json_brief(kernels));
    for (const auto& [k, v] : kernels.items()) {
      TUPE_CHECK(v.is_string(),
                 where << ": key 'attention_kernels." << k << "': expected a string, got " << json_brief(v));
      s.attention_kernels.emplace_back(k, v.get<std::string>());
    }
  }
  return s;
}

}  // namespace tupe::checkpoint
