#include "checkpoint/hf_import.h"

#include <ATen/ATen.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "checkpoint/durable_io.h"
#include "checkpoint/json_brief.h"
#include "checkpoint/safetensors.h"
#include "common/error.h"
#include "common/sha256.h"
#include "model/hf_names.h"
#include "model/tupe_bert.h"

namespace tupe::checkpoint {

namespace fs = std::filesystem;
using Json = nlohmann::json;

namespace {

constexpr char kManifest[] = "manifest.json";

/// config.json parsed, with typed access naming the key on error.
class HfConfig {
 public:
  explicit HfConfig(const fs::path& file) : where_(file.string()) {
    std::ifstream in(file);
    TUPE_CHECK(in, where_ << ": cannot open");
    try {
      root_ = Json::parse(in);
    } catch (const nlohmann::json::parse_error& e) {
      TUPE_FAIL(where_ << ": not valid JSON at byte " << e.byte);
    }
    TUPE_CHECK(root_.is_object(), where_ << ": the JSON document is not an object");
  }
  /// The integer at `key`, or `fallback` (transformers' BertConfig default) when absent.
  int64_t integer(const std::string& key, int64_t fallback) const {
    if (!root_.contains(key)) return fallback;
    const Json& v = root_[key];
    TUPE_CHECK(v.is_number_integer(), where_ << ": key '" << key << "': expected an integer, got " << json_brief(v));
    return v.get<int64_t>();
  }
  double real(const std::string& key, double fallback) const {
    if (!root_.contains(key) || root_[key].is_null()) return fallback;
    const Json& v = root_[key];
    TUPE_CHECK(v.is_number(), where_ << ": key '" << key << "': expected a number, got " << json_brief(v));
    return v.get<double>();
  }
  std::string text(const std::string& key, const std::string& fallback) const {
    if (!root_.contains(key) || root_[key].is_null()) return fallback;
    const Json& v = root_[key];
    TUPE_CHECK(v.is_string(), where_ << ": key '" << key << "': expected a string, got " << json_brief(v));
    return v.get<std::string>();
  }
  bool boolean(const std::string& key, bool fallback) const {
    if (!root_.contains(key) || root_[key].is_null()) return fallback;
    const Json& v = root_[key];
    TUPE_CHECK(v.is_boolean(), where_ << ": key '" << key << "': expected true or false, got " << json_brief(v));
    return v.get<bool>();
  }
  /// architectures[0], or "" when the file names none.
  std::string architecture() const {
    if (!root_.contains("architectures") || root_["architectures"].is_null()) return "";
    const Json& v = root_["architectures"];
    TUPE_CHECK(v.is_array() && (v.empty() || v[0].is_string()),
               where_ << ": key 'architectures': expected a list of names, got " << json_brief(v));
    return v.empty() ? "" : v[0].get<std::string>();
  }
  const std::string& where() const { return where_; }

 private:
  std::string where_;
  Json root_;
};

/// The BERT config.json as tupe's options: BERT-A, post-LN, erf GELU. Refuses what tupe's BERT-A is not.
model::ModelOptions bert_options(const HfConfig& c) {
  const std::string type = c.text("model_type", "");
  TUPE_CHECK(type != "tupe", c.where() << ": model_type 'tupe': a folder of `tupe export --format hf-tupe`; give "
                                           "the tupe checkpoint it was exported from");
  TUPE_CHECK(type == "bert", c.where() << ": model_type '" << type
                                       << "' is not BERT; tupe imports BertModel, BertForMaskedLM, BertForPreTraining and "
                                          "BertForSequenceClassification folders (model_type \"bert\")");
  const std::string positions = c.text("position_embedding_type", "absolute");
  TUPE_CHECK(positions == "absolute", c.where() << ": position_embedding_type '" << positions
                                                << "': tupe's BERT-A has absolute positions only");
  const std::string act = c.text("hidden_act", "gelu");
  TUPE_CHECK(act == "gelu", c.where() << ": hidden_act '" << act << "': tupe's BERT uses erf GELU (\"gelu\") only");
  TUPE_CHECK(!c.boolean("is_decoder", false) && !c.boolean("add_cross_attention", false),
             c.where() << ": a BERT decoder (is_decoder / add_cross_attention): tupe's BERT is an encoder");
  model::ModelOptions o;
  o.vocab_size = c.integer("vocab_size", 30522);
  o.hidden_size = c.integer("hidden_size", 768);
  o.num_layers = c.integer("num_hidden_layers", 12);
  o.num_heads = c.integer("num_attention_heads", 12);
  o.ffn_size = c.integer("intermediate_size", 3072);
  o.max_positions = c.integer("max_position_embeddings", 512);
  o.type_vocab_size = c.integer("type_vocab_size", 2);
  o.layer_norm_eps = c.real("layer_norm_eps", 1e-12);
  o.hidden_dropout = c.real("hidden_dropout_prob", 0.1);
  o.attention_dropout = c.real("attention_probs_dropout_prob", 0.1);
  o.init_std = c.real("initializer_range", 0.02);
  o.position_encoding = model::PositionEncoding::kBertAbsolute;
  o.untie_cls = false;
  o.layer_norm = model::LayerNormPlacement::kPost;
  try {
    o.validate();
    TUPE_CHECK(o.vocab_size > 0, "model.vocab_size: must be positive, got " << o.vocab_size);
  } catch (const Error& e) {
    TUPE_FAIL(c.where() << ": as tupe's " << e.what());
  }
  return o;
}

/// Lower-casing of the folder's BERT tokenizer (tokenizer_config.json; BertTokenizer's default
/// do_lower_case = true). Refuses strip_accents that differs from lower-casing: tupe's WordPiece
/// strips accents exactly when it lower-cases (BERT uncased / cased).
bool bert_lower_case(const fs::path& dir) {
  const fs::path file = dir / "tokenizer_config.json";
  if (!fs::exists(file)) return true;
  const HfConfig t(file);
  const bool lower = t.boolean("do_lower_case", true);
  if (t.boolean("strip_accents", lower) != lower)
    TUPE_FAIL(t.where() << ": strip_accents " << (lower ? "false" : "true") << " with do_lower_case "
                        << (lower ? "true" : "false")
                        << ": tupe's WordPiece strips accents exactly when it lower-cases");
  return lower;
}

/// Entries of a vocab.txt (one token per line; a last line without a newline counts).
int64_t vocab_entries(const std::string& bytes) {
  int64_t lines = 0;
  for (char ch : bytes) lines += ch == '\n';
  if (!bytes.empty() && bytes.back() != '\n') ++lines;
  return lines;
}

/// The WordPiece vocabulary of a tokenizer.json (transformers 5 saves a BERT tokenizer as that
/// file alone) as vocab.txt's bytes: one token per line in id order. Throws tupe::Error
/// "<file>: ..." for another model type or ids that are not 0..N-1.
std::string wordpiece_vocab_of(const fs::path& file) {
  std::ifstream in(file);
  TUPE_CHECK(in, file.string() << ": cannot open");
  Json root;
  try {
    root = Json::parse(in);
  } catch (const nlohmann::json::parse_error& e) {
    TUPE_FAIL(file.string() << ": not valid JSON at byte " << e.byte);
  }
  const bool wordpiece = root.is_object() && root.contains("model") && root["model"].is_object() &&
                         root["model"].value("type", "") == "WordPiece";
  TUPE_CHECK(wordpiece, file.string() << ": not a WordPiece tokenizer (model.type), so not BERT's; and no vocab.txt");
  const Json& vocab = root["model"]["vocab"];
  TUPE_CHECK(vocab.is_object() && !vocab.empty(), file.string() << ": key 'model.vocab': expected an object of ids");
  std::vector<std::string> tokens(vocab.size());
  std::vector<bool> seen(vocab.size(), false);
  for (const auto& [token, id] : vocab.items()) {
    TUPE_CHECK(id.is_number_integer() && id.get<int64_t>() >= 0 && id.get<int64_t>() < static_cast<int64_t>(vocab.size()) &&
                   !seen[id.get<size_t>()],
               file.string() << ": key 'model.vocab': token '" << token << "' has id " << json_brief(id)
                             << ", not one of 0.." << vocab.size() - 1 << " used once");
    TUPE_CHECK(token.find('\n') == std::string::npos, file.string() << ": a token holds a line break");
    seen[id.get<size_t>()] = true;
    tokens[id.get<size_t>()] = token;
  }
  std::string bytes;
  for (const auto& t : tokens) bytes += t + "\n";
  return bytes;
}

/// `bytes` in a file named by their SHA-256 in the temporary folder (written once, atomically;
/// every rank writes its own copy), for the readers that take a vocabulary by path.
fs::path stored_vocab(const std::string& bytes) {
  const fs::path file = fs::temp_directory_path() / ("tupe-vocab-" + sha256_hex(bytes).substr(0, 24) + ".txt");
  std::error_code ec;
  if (fs::exists(file, ec) && read_file_bytes(file) == bytes) return file;
  write_file_atomic(file, bytes);
  return file;
}

}  // namespace

bool HfBertFolder::has_mlm_head() const { return find_tensor(tensors, "mlm_head.bias").defined(); }

bool looks_like_hf_folder(const fs::path& path) {
  std::error_code ec;
  if (!fs::is_directory(path, ec) || fs::exists(path / kManifest, ec)) return false;
  return fs::exists(path / "config.json", ec) || fs::exists(path / "model.safetensors", ec) ||
         fs::exists(path / "pytorch_model.bin", ec);
}

std::string bin_conversion_command(const fs::path& dir) {
  const std::string d = dir.string();
  return "python -c \"import torch; from safetensors.torch import save_file; sd = torch.load('" + d +
         "/pytorch_model.bin', map_location='cpu', weights_only=True); save_file({k: v.clone().contiguous() for k, v "
         "in sd.items()}, '" + d + "/model.safetensors', metadata={'format': 'pt'})\"";
}

HfBertFolder read_hf_bert_folder(const fs::path& dir) {
  std::error_code ec;
  HfBertFolder out;
  out.dir = dir;
  const fs::path config_file = dir / "config.json", weights = dir / "model.safetensors";
  TUPE_CHECK(fs::exists(config_file, ec),
             dir.string() << ": no config.json: neither a tupe checkpoint (manifest.json, step_<N> folders) nor a "
                             "Hugging Face folder");
  const HfConfig config(config_file);
  out.config = bert_options(config);
  out.architecture = config.architecture();
  if (out.architecture.empty()) out.architecture = "BertModel";
  if (!fs::exists(weights, ec)) {
    TUPE_CHECK(!fs::exists(dir / "pytorch_model.bin", ec),
               weights.string() << ": missing; the folder has only pytorch_model.bin (a pickle, which tupe does not "
                                   "read); convert it with the setup's Python (torch and safetensors): "
                                << bin_conversion_command(dir));
    TUPE_FAIL(weights.string() << ": missing (tupe reads the weights of a Hugging Face folder from model.safetensors; "
                                  "sharded *.safetensors.index.json folders are not read)");
  }
  const SafetensorsContents file = read_safetensors(weights);
  const std::string where = weights.string();

  // HF name -> tupe name through the export's table; the rest is left out or refused.
  std::map<std::string, at::Tensor> by_tupe;  // tupe name -> tensor
  std::map<std::string, std::string> hf_of;    // tupe name -> the HF name it came from
  at::Tensor decoder;                          // cls.predictions.decoder.weight, when stored
  for (const auto& [name, t] : file.tensors) {
    if (name == "embeddings.position_ids" || name == "bert.embeddings.position_ids") continue;  // a buffer
    if (name == "cls.predictions.decoder.weight") {
      decoder = t;
      continue;
    }
    if (name == "cls.predictions.decoder.bias") continue;  // transformers ties it to cls.predictions.bias
    const std::string tupe = model::tupe_name_from_hf_bert(name);
    if (tupe.empty() || tupe.rfind("sentence_head.out.", 0) == 0) {
      out.left_out.push_back(name);
      continue;
    }
    TUPE_CHECK(at::isFloatingType(t.scalar_type()),
               where << ": tensor '" << name << "': dtype " << t.scalar_type() << " is not floating point");
    TUPE_CHECK(!by_tupe.count(tupe), where << ": tensor '" << name << "' and '" << hf_of[tupe]
                                           << "' are the same parameter (BertModel and BertFor* names mixed)");
    by_tupe[tupe] = t.to(at::kFloat);
    hf_of[tupe] = name;
  }

  // Every encoder tensor of the config's model, of its shape; the MLM head and the pooler
  // whole or not at all. The shapes are those of the model itself (a probe built once here).
  model::TupeBert probe(out.config, /*num_labels=*/1);
  std::vector<std::string> missing;
  bool any_head = false, all_head = true, any_pooler = false, all_pooler = true;
  for (const auto& item : probe->named_parameters()) {
    const std::string& name = item.key();
    const bool head = name.rfind("mlm_head.", 0) == 0, pooler = name.rfind("sentence_head.dense.", 0) == 0;
    if (name.rfind("sentence_head.out.", 0) == 0) continue;
    const auto it = by_tupe.find(name);
    if (it == by_tupe.end()) {
      if (head) all_head = false;
      else if (pooler) all_pooler = false;
      else missing.push_back(model::hf_bert_name(name));
      continue;
    }
    any_head |= head;
    any_pooler |= pooler;
    const at::Tensor& t = it->second;
    TUPE_CHECK(t.sizes() == item.value().sizes(),
               where << ": tensor '" << hf_of[name] << "': shape " << shape_text(t.sizes()) << ", but config.json ("
                     << config_file.filename().string() << ") makes it " << shape_text(item.value().sizes()));
    (pooler ? out.pooler : out.tensors).emplace_back(name, t.contiguous());
    by_tupe.erase(it);
  }
  if (!missing.empty()) {
    std::string names;
    for (size_t i = 0; i < missing.size() && i < 4; ++i) names += (i ? ", " : "") + missing[i];
    TUPE_FAIL(where << ": " << missing.size() << " tensor(s) of a BERT with config.json's sizes missing: " << names
                    << (missing.size() > 4 ? ", ..." : "") << " (names as BertForMaskedLM writes them)");
  }
  TUPE_CHECK(!any_head || all_head, where << ": the MLM head (cls.predictions.*) is incomplete");
  TUPE_CHECK(!any_pooler || all_pooler, where << ": the pooler (bert.pooler.dense.*) is incomplete");
  for (const auto& [name, t] : by_tupe) out.left_out.push_back(hf_of[name]);  // e.g. layers beyond num_hidden_layers
  TUPE_CHECK(by_tupe.empty(), where << ": tensor '" << hf_of[by_tupe.begin()->first]
                                    << "' does not fit config.json's model (num_hidden_layers "
                                    << out.config.num_layers << ")");
  if (decoder.defined()) {
    const at::Tensor word = find_tensor(out.tensors, "encoder.embeddings.word.weight");
    TUPE_CHECK(decoder.sizes() == word.sizes() && at::equal(decoder.to(at::kFloat), word),
               where << ": cls.predictions.decoder.weight differs from the word embedding: an untied decoder, which "
                        "tupe's MLM head (tied, as BERT's) cannot hold");
  }

  // The vocabulary: its entries are the embedding's rows.
  const fs::path vocab = dir / "vocab.txt";
  std::string vocab_bytes;
  if (fs::exists(vocab, ec)) {
    vocab_bytes = read_file_bytes(vocab);
    out.vocab_path = vocab;
  } else {
    TUPE_CHECK(fs::exists(dir / "tokenizer.json", ec),
               vocab.string() << ": missing, and no tokenizer.json: the folder has no BERT vocabulary");
    vocab_bytes = wordpiece_vocab_of(dir / "tokenizer.json");
    out.vocab_path = stored_vocab(vocab_bytes);
  }
  const int64_t entries = vocab_entries(vocab_bytes);
  const std::string vocab_source = out.vocab_path == vocab ? vocab.string() : (dir / "tokenizer.json").string();
  TUPE_CHECK(entries == out.config.vocab_size,
             vocab_source << ": " << entries << " entries, but the word embedding has " << out.config.vocab_size
                            << " rows (config.json vocab_size)");
  out.vocab_sha256 = sha256_hex(vocab_bytes);
  out.tokenizer = TokenizerRecord{"wordpiece", bert_lower_case(dir), "vocab.txt"};
  out.weights_sha256 = file_sha256_hex(weights.string());
  return out;
}

}  // namespace tupe::checkpoint
