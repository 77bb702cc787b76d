#include "trainer/export/export.h"

#include <ATen/ATen.h>
#include <unistd.h>

#include <fstream>
#include <regex>

#include "common/error.h"
#include "common/sha256.h"
#include "trainer/export/checkpoint_model.h"
#include "trainer/export/hf_bert.h"
#include "trainer/safetensors.h"

namespace tupe::exporting {
namespace fs = std::filesystem;

std::string describe_tupe_tensor(const std::string& name) {
  static const std::vector<std::pair<std::regex, std::string>> table = {
      {std::regex(R"(encoder\.embeddings\.word\.weight)"), "word embedding E (V, d); also the tied MLM decoder"},
      {std::regex(R"(encoder\.embeddings\.position\.weight)"), "BERT absolute position embedding (max_positions, d), added to the input"},
      {std::regex(R"(encoder\.embeddings\.segment\.weight)"), "segment (token type) embedding (type_vocab_size, d)"},
      {std::regex(R"(encoder\.embeddings\.norm\.(weight|bias))"), "LayerNorm over d of the input embedding"},
      {std::regex(R"(encoder\.positional\.table\.weight)"), "TUPE position table p (rows, d); with the [CLS] untie row 0 = p_theta1, row 1 = p_theta2, position t >= 1 uses row t + 1"},
      {std::regex(R"(encoder\.positional\.norm\.(weight|bias))"), "TUPE LayerNorm over d applied to position table rows"},
      {std::regex(R"(encoder\.positional\.query\.(weight|bias))"), "TUPE U^Q (d, d) + b^Q: positional query projection, shared by all layers (Eq. 7)"},
      {std::regex(R"(encoder\.positional\.key\.(weight|bias))"), "TUPE U^K (d, d) + b^K: positional key projection, shared by all layers (Eq. 7)"},
      {std::regex(R"(encoder\.positional\.relative_bias\.weight)"), "T5 relative bias b (buckets + 1, H), unscaled, shared by all layers (Eq. 8)"},
      {std::regex(R"(encoder\.layers\.\d+\.attention\.(query|key|value)\.(weight|bias))"), "attention W^Q/W^K/W^V (d, d) [out, in] + bias"},
      {std::regex(R"(encoder\.layers\.\d+\.attention\.output\.(weight|bias))"), "attention output W^O (d, d) + bias"},
      {std::regex(R"(encoder\.layers\.\d+\.attention_norm\.(weight|bias))"), "LayerNorm after (post-LN) or before (pre-LN) attention"},
      {std::regex(R"(encoder\.layers\.\d+\.ffn_in\.(weight|bias))"), "FFN W_1 (F, d) + b_1, GELU (erf)"},
      {std::regex(R"(encoder\.layers\.\d+\.ffn_out\.(weight|bias))"), "FFN W_2 (d, F) + b_2"},
      {std::regex(R"(encoder\.layers\.\d+\.ffn_norm\.(weight|bias))"), "LayerNorm after (post-LN) or before (pre-LN) the FFN"},
      {std::regex(R"(encoder\.final_norm\.(weight|bias))"), "final LayerNorm (pre-LN only)"},
      {std::regex(R"(mlm_head\.dense\.(weight|bias))"), "MLM head transform W_t (d, d) + b_t, then GELU"},
      {std::regex(R"(mlm_head\.norm\.(weight|bias))"), "MLM head LayerNorm; logits = LN(GELU(h W_t + b_t)) E^T + b_V"},
      {std::regex(R"(mlm_head\.bias)"), "MLM decoder bias b_V (V)"},
      {std::regex(R"(sentence_head\..*)"), "GLUE sentence head (pooler dense, classifier out)"},
  };
  for (const auto& [re, text] : table)
    if (std::regex_match(name, re)) return text;
  return "";
}

namespace {

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  TUPE_CHECK(out, path.string() << ": cannot create");
  out << text;
  out.close();
  TUPE_CHECK(out, path.string() << ": write failed");
}

int64_t count_lines(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  TUPE_CHECK(in, path.string() << ": cannot read");
  int64_t n = 0;
  std::string line;
  while (std::getline(in, line)) ++n;
  return n;
}

/// The vocabulary to copy: the option, else the checkpoint's tokenizer.vocab when readable.
fs::path pick_vocab(const ExportOptions& options, const CheckpointModel& ckpt) {
  if (!options.vocab.empty()) {
    TUPE_CHECK(fs::is_regular_file(options.vocab), "--vocab " << options.vocab.string() << ": no such file");
    return options.vocab;
  }
  const auto it = ckpt.contents.state.config.find("tokenizer.vocab");
  if (it != ckpt.contents.state.config.end() && fs::is_regular_file(it->second)) return it->second;
  return {};
}

}  // namespace

ExportResult export_checkpoint(const ExportOptions& options) {
  TUPE_CHECK(options.format == "auto" || options.format == "hf" || options.format == "tupe",
             "--format: '" << options.format << "' is not one of auto, hf, tupe");
  TUPE_CHECK(!options.output.empty(), "--output: missing");
  TUPE_CHECK(!fs::exists(options.output), "--output " << options.output.string() << ": already exists (remove it first)");
  CheckpointModel ckpt = load_checkpoint_model(options.checkpoint);
  const std::string where = ckpt.dir.string();
  const std::string refusal = hf_bert_refusal(ckpt.config);

  ExportResult result;
  result.checkpoint = ckpt.dir;
  result.format = options.format == "auto" ? (refusal.empty() ? "hf" : "tupe") : options.format;
  TUPE_CHECK(result.format != "hf" || refusal.empty(),
             where << ": cannot export to HuggingFace BertForMaskedLM (--format hf): " << refusal << "; use --format tupe");

  result.vocab = pick_vocab(options, ckpt);
  if (!result.vocab.empty()) {
    const std::string& saved = ckpt.contents.state.vocab_sha256;
    const std::string actual = file_sha256_hex(result.vocab.string());
    TUPE_CHECK(saved.empty() || saved == actual, result.vocab.string() << ": vocabulary sha256 " << actual
                                                     << " differs from the checkpoint's " << saved << " (" << where << ")");
    if (result.vocab.extension() == ".txt") {
      const int64_t lines = count_lines(result.vocab);
      TUPE_CHECK(lines == ckpt.config.vocab_size, result.vocab.string() << ": " << lines << " tokens, the model has vocab_size "
                                                                        << ckpt.config.vocab_size);
    }
  }

  const fs::path tmp = options.output.string() + ".tmp-" + std::to_string(::getpid());
  fs::remove_all(tmp);
  fs::create_directories(tmp);
  try {
    if (result.format == "hf") {
      trainer::write_safetensors(tmp / "model.safetensors", to_hf_bert_tensors(ckpt.contents.model, ckpt.config, where),
                                 {{"format", "pt"}});
      write_text(tmp / "config.json", hf_bert_config(ckpt.config).dump(2) + "\n");
      if (!result.vocab.empty()) {
        fs::copy_file(result.vocab, tmp / "vocab.txt");
        const auto lc = ckpt.contents.state.config.find("tokenizer.lower_case");
        const bool lower = lc == ckpt.contents.state.config.end() || lc->second == "true";
        nlohmann::json tok = {{"tokenizer_class", "BertTokenizer"}, {"do_lower_case", lower},
                              {"model_max_length", ckpt.config.max_positions}};
        write_text(tmp / "tokenizer_config.json", tok.dump(2) + "\n");
      }
      result.note = "HuggingFace BertForMaskedLM: BertForMaskedLM.from_pretrained(\"" + options.output.string() + "\")";
    } else {
      trainer::NamedTensors tensors;
      nlohmann::json described = nlohmann::json::object();
      for (const auto& [name, t] : ckpt.contents.model) {
        tensors.emplace_back(name, t.detach().to(at::kFloat).contiguous());
        described[name] = {{"shape", t.sizes().vec()}, {"dtype", "F32"}, {"meaning", describe_tupe_tensor(name)}};
      }
      const std::string variant = model::to_string(ckpt.config.position_encoding);
      result.note = refusal.empty() ? "tupe layout (requested with --format tupe)"
                                    : "no HuggingFace layout: " + refusal + "; wrote tupe's layout (config.json names every tensor)";
      nlohmann::json model_kv = nlohmann::json::object();
      for (const auto& [k, v] : model::ModelConfig::fields().to_kv(ckpt.config)) model_kv[k] = v;
      nlohmann::json cfg = {{"format", "tupe-model"},
                            {"format_version", 1},
                            {"architecture", "TUPE-BERT (Ke, He, Liu, ICLR 2021)"},
                            {"position_encoding", variant},
                            {"source_checkpoint", ckpt.dir.string()},
                            {"step", ckpt.contents.state.step},
                            {"vocab_sha256", ckpt.contents.state.vocab_sha256},
                            {"model", model_kv},
                            {"tensors", described},
                            {"note", result.note}};
      trainer::write_safetensors(tmp / "model.safetensors", tensors, {{"format", "pt"}, {"tupe.position_encoding", variant}});
      write_text(tmp / "config.json", cfg.dump(2) + "\n");
      if (!result.vocab.empty()) fs::copy_file(result.vocab, tmp / ("vocab" + result.vocab.extension().string()));
    }
    fs::rename(tmp, options.output);
  } catch (...) {
    std::error_code ec;
    fs::remove_all(tmp, ec);
    throw;
  }
  return result;
}

}  // namespace tupe::exporting
