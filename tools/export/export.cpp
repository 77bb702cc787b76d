#include "tools/export/export.h"

#include <ATen/ATen.h>
#include <unistd.h>

#include <fstream>
#include <regex>

#include "checkpoint/durable_io.h"
#include "checkpoint/model_checkpoint.h"
#include "checkpoint/safetensors.h"
#include "common/config_fields.h"
#include "common/error.h"
#include "model/hf_names.h"
#include "tools/export/checkpoint_vocab.h"
#include "tools/export/hf_bert.h"
#include "tools/export/hf_tokenizer.h"
#include "tools/export/hf_tupe.h"
#include "tools/export/model_card.h"

namespace tupe::exporting {
namespace fs = std::filesystem;

std::string describe_tupe_tensor(const std::string& name) {
  static const std::vector<std::pair<std::regex, std::string>> table = {
      {std::regex(R"(encoder\.embeddings\.word\.weight)"), "word embedding E (V, d); also the tied MLM decoder"},
      {std::regex(R"(encoder\.embeddings\.position\.weight)"), "BERT absolute position embedding (max_positions, d), added to the input"},
      {std::regex(R"(encoder\.embeddings\.segment\.weight)"), "segment (token type) embedding (type_vocab_size, d)"},
      {std::regex(R"(encoder\.embeddings\.norm\.(weight|bias))"), "LayerNorm over d of the input embedding"},
      {std::regex(R"(encoder\.positional\.table\.weight)"), "position table p (rows, d) of TUPE and BERT-A^d; with TUPE's [CLS] untie row 0 = p_theta1, row 1 = p_theta2, position t >= 1 uses row t + 1"},
      {std::regex(R"(encoder\.positional\.norm\.(weight|bias))"), "LayerNorm over d applied to position table rows (TUPE, BERT-A^d)"},
      {std::regex(R"(encoder\.positional\.query\.(weight|bias))"), "U^Q (d, d) + b^Q: positional query projection, shared by all layers (TUPE Eq. 7; BERT-A^d adds it to every layer's query)"},
      {std::regex(R"(encoder\.positional\.key\.(weight|bias))"), "U^K (d, d) + b^K: positional key projection, shared by all layers (TUPE Eq. 7; BERT-A^d adds it to every layer's key)"},
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


/// Label names of a fine-tuned model, in id order (glue.labels; {} for regression or a model
/// saved without them).
std::vector<std::string> task_labels(const checkpoint::ModelCheckpoint& ckpt) {
  if (static_cast<int64_t>(ckpt.labels.size()) == ckpt.num_labels) return ckpt.labels;
  return {};
}

void write_tupe_layout(const fs::path& tmp, const checkpoint::ModelCheckpoint& ckpt, const ExportResult& result,
                       const std::string& refusal) {
  checkpoint::NamedTensors tensors;
  nlohmann::json described = nlohmann::json::object();
  for (const auto& [name, t] : ckpt.contents.model) {
    tensors.emplace_back(name, t.detach().to(at::kFloat).contiguous());
    described[name] = {{"shape", t.sizes().vec()}, {"dtype", "F32"}, {"meaning", describe_tupe_tensor(name)}};
  }
  const std::string variant = model::to_string(ckpt.config.position_encoding);
  nlohmann::json model_kv = nlohmann::json::object();
  for (const auto& [k, v] : model::ModelOptions::fields().to_kv(ckpt.config)) model_kv[k] = v;
  nlohmann::json cfg = {{"format", "tupe-model"},
                        {"format_version", 1},
                        {"architecture", "TUPE-BERT (Ke, He, Liu, ICLR 2021)"},
                        {"position_encoding", variant},
                        {"source_checkpoint", ckpt.dir.string()},
                        {"step", ckpt.contents.state.step},
                        {"vocab_sha256", ckpt.contents.state.vocab_sha256},
                        {"model", model_kv},
                        {"tensors", described},
                        {"note", refusal.empty() ? std::string("tupe layout (requested with --format tupe)")
                                                 : "tupe layout (requested with --format tupe); BertModel cannot hold it: " + refusal +
                                                       "; --format hf writes a Hugging Face folder with tupe's modeling code"}};
  checkpoint::write_safetensors(tmp / "model.safetensors", tensors, {{"format", "pt"}, {"tupe.position_encoding", variant}});
  checkpoint::write_file_atomic(tmp / "config.json", cfg.dump(2) + "\n");
  if (!result.vocab.empty()) fs::copy_file(result.vocab, tmp / ("vocab" + result.vocab.extension().string()));
}

}  // namespace

namespace {
constexpr Choice<ExportFormat> kExportFormatWords[] = {{"auto", ExportFormat::kAuto},
                                                       {"hf", ExportFormat::kHf},
                                                       {"hf-bert", ExportFormat::kHfBert},
                                                       {"hf-tupe", ExportFormat::kHfTupe},
                                                       {"tupe", ExportFormat::kTupe}};
}  // namespace

std::string to_string(ExportFormat f) { return choice_word(f, kExportFormatWords); }

ExportFormat parse_export_format(const std::string& option, const std::string& text) {
  return parse_choice(option, text, kExportFormatWords);
}

ExportResult export_checkpoint(const ExportOptions& options) {
  const ExportFormat f = options.format;
  TUPE_CHECK(!options.output.empty(), "--output: missing");
  // A new folder, or an empty one (the rename below replaces an empty folder).
  std::error_code out_ec;
  TUPE_CHECK(!fs::exists(options.output, out_ec) || (fs::is_directory(options.output, out_ec) && fs::is_empty(options.output, out_ec)),
             "--output " << options.output.string()
                         << (fs::is_directory(options.output, out_ec) ? ": a folder that is not empty" : ": a file")
                         << " (give a new or an empty folder, or remove it first)");
  const checkpoint::ModelCheckpoint ckpt = checkpoint::read_model_checkpoint(options.checkpoint);
  const std::string where = ckpt.dir.string();
  const std::string refusal = model::hf_bert_refusal(ckpt.config);

  ExportResult result;
  result.checkpoint = ckpt.dir;
  result.format = (f == ExportFormat::kAuto || f == ExportFormat::kHf)
                      ? (refusal.empty() ? ExportFormat::kHfBert : ExportFormat::kHfTupe)
                      : f;
  TUPE_CHECK(result.format != ExportFormat::kHfBert || refusal.empty(),
             where << ": cannot export to HuggingFace BertForMaskedLM (--format hf-bert): " << refusal
                   << "; use --format hf (tupe's modeling code, trust_remote_code=True)");
  result.vocab = pick_checkpoint_vocab(options.vocab, ckpt);
  if (!result.vocab.empty()) check_checkpoint_vocab(result.vocab, ckpt);
  const bool hf = result.format != ExportFormat::kTupe;
  const bool lower_case =
      hf && !result.vocab.empty() && tokenizer_kind_of(result.vocab) == data_pipeline::TokenizerKind::kWordPiece
          ? resolve_lower_case(options.lower_case, ckpt)
          : true;

  const fs::path tmp = options.output.string() + ".tmp-" + std::to_string(::getpid());
  fs::remove_all(tmp);
  fs::create_directories(tmp);
  try {
    const std::string out = options.output.string();
    if (result.format == ExportFormat::kHfBert) {
      result.architecture = ckpt.num_labels > 0 ? "BertForSequenceClassification" : "BertForMaskedLM";
      checkpoint::write_safetensors(tmp / "model.safetensors", to_hf_bert_tensors(ckpt.contents.model, ckpt.config, where),
                                 {{"format", "pt"}});
      checkpoint::write_file_atomic(tmp / "config.json",
                                 hf_bert_config(ckpt.config, ckpt.num_labels, task_labels(ckpt)).dump(2) + "\n");
      result.note = "transformers' " + result.architecture + " (no remote code): " +
                    (ckpt.num_labels > 0 ? "AutoModelForSequenceClassification" : "AutoModelForMaskedLM") +
                    ".from_pretrained(\"" + out + "\")";
    } else if (result.format == ExportFormat::kHfTupe) {
      HeadInfo heads{ckpt.has_mlm_head, ckpt.num_labels, task_labels(ckpt), ckpt.task};
      result.architecture = ckpt.num_labels > 0 ? "TupeForSequenceClassification" : "TupeForMaskedLM";
      checkpoint::write_safetensors(tmp / "model.safetensors", to_hf_tupe_tensors(ckpt.contents.model, where),
                                 {{"format", "pt"}});
      checkpoint::write_file_atomic(tmp / "config.json", hf_tupe_config(ckpt.config, heads).dump(2) + "\n");
      for (const auto& [name, text] : hf_tupe_sources()) checkpoint::write_file_atomic(tmp / name, text);
      result.note = "tupe's modeling code (" + result.architecture + "): " +
                    (ckpt.num_labels > 0 ? "AutoModelForSequenceClassification" : "AutoModelForMaskedLM") +
                    ".from_pretrained(\"" + out + "\", trust_remote_code=True)" +
                    (refusal.empty() ? "" : " (not BertForMaskedLM: " + refusal + ")");
    } else {
      write_tupe_layout(tmp, ckpt, result, refusal);
      result.note = "tupe layout: model.safetensors under tupe's names, config.json naming every tensor";
    }
    if (hf && !result.vocab.empty())
      write_hf_tokenizer(tmp, result.vocab, lower_case, ckpt.config.max_positions, ckpt.config.type_vocab_size > 0);
    // README.md: the model card, from what the checkpoint and the files beside it record.
    fs::path name = options.output.lexically_normal();
    if (name.filename().empty()) name = name.parent_path();
    const CardExport how{to_string(result.format), result.architecture, name.filename().string(), out,
                         hf && !result.vocab.empty()};
    const bool wordpiece = !result.vocab.empty() && tokenizer_kind_of(result.vocab) == data_pipeline::TokenizerKind::kWordPiece;
    const CardFacts facts = gather_card_facts(ckpt, result.vocab.string(),
                                              hf && wordpiece ? std::optional<bool>(lower_case) : std::nullopt);
    checkpoint::write_file_atomic(tmp / "README.md", model_card_markdown(facts, how));
    fs::rename(tmp, options.output);
  } catch (...) {
    std::error_code ec;
    fs::remove_all(tmp, ec);
    throw;
  }
  return result;
}

}  // namespace tupe::exporting
