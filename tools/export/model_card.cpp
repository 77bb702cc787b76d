#include "tools/export/model_card.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

namespace tupe::exporting {

namespace {

/// A YAML (and JSON) double-quoted string.
std::string q(const std::string& s) { return nlohmann::json(s).dump(); }

/// A path as a card shows it: a relative one as given; an absolute one by its last two
/// components ("/scratch/u/runs/tupe_r/step_00000600" -> "tupe_r/step_00000600"), so that a
/// card published to the Hub names the run and the file without the machine's folder layout.
std::string shown(const std::string& path) {
  const std::filesystem::path p(path);
  if (path.empty() || !p.is_absolute()) return path;
  const std::filesystem::path name = p.filename(), parent = p.parent_path().filename();
  return parent.empty() ? name.string() : (parent / name).string();
}

/// A recorded command line with each absolute path in it (a word, or the value of
/// "--key=/path") shown as above; the words and their order are kept.
std::string shown_command(const std::string& line) {
  std::string out, word;
  auto flush = [&] {
    const size_t eq = word.find("=/");
    if (!word.empty() && word[0] == '/') word = shown(word);
    else if (eq != std::string::npos) word = word.substr(0, eq + 1) + shown(word.substr(eq + 1));
    out += word;
    word.clear();
  };
  for (const char ch : line) {
    if (ch == ' ' || ch == '\n' || ch == '\t') {
      flush();
      out += ch;
    } else {
      word += ch;
    }
  }
  flush();
  return out;
}

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

/// 1234567 -> "1,234,567".
std::string grouped(int64_t n) {
  std::string digits = std::to_string(n < 0 ? -n : n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return (n < 0 ? "-" : "") + out;
}

/// "TUPE-A (tie-cls)" -> "tupe-a"; "BERT-A^d" -> "bert-a-d".
std::string slug(const std::string& variant) {
  std::string out;
  for (char c : variant.substr(0, variant.find(' '))) out += c == '^' ? '-' : static_cast<char>(std::tolower(c));
  return out;
}

/// GLUE tasks as the Hub's nyu-mll/glue dataset names its configurations.
const std::map<std::string, std::string>& glue_configs() {
  static const std::map<std::string, std::string> m = {
      {"CoLA", "cola"}, {"SST-2", "sst2"}, {"MRPC", "mrpc"}, {"STS-B", "stsb"}, {"QQP", "qqp"},
      {"MNLI", "mnli"}, {"QNLI", "qnli"}, {"RTE", "rte"},   {"WNLI", "wnli"}};
  return m;
}

/// tupe's metric names -> the Hub's metric types.
std::string hub_metric(const std::string& name) {
  if (name == "mcc") return "matthews_correlation";
  if (name == "pearson") return "pearsonr";
  if (name == "spearman") return "spearmanr";
  return name;
}

/// "dev" -> "validation", "dev_matched" -> "validation_matched" (the Hub's split names).
std::string hub_split(const std::string& split) {
  return split.rfind("dev", 0) == 0 ? "validation" + split.substr(3) : split;
}

void metadata(std::ostringstream& o, const CardFacts& f, const CardExport& how) {
  const model::ModelOptions& c = f.ckpt->config;
  const bool ft = f.finetune.has_value();
  o << "---\n";
  o << "library_name: " << (how.format == "tupe" ? "tupe" : "transformers") << "\n";
  o << "pipeline_tag: " << (ft ? "text-classification" : "fill-mask") << "\n";
  o << "language:\n- en\n";
  o << "tags:\n- tupe\n- bert\n- " << (ft ? "text-classification" : "fill-mask") << "\n";
  o << "- " << q(slug(f.variant)) << "\n- " << q(model::to_string(c.position_encoding)) << "\n";
  if (f.variant.find("(tie-cls)") != std::string::npos) o << "- tie-cls\n";
  if (f.variant.find("(untie-cls)") != std::string::npos) o << "- untie-cls\n";
  if (c.layer_norm == model::LayerNormPlacement::kPre) o << "- pre-ln\n";
  if (how.format == "hf-tupe") o << "- custom_code\n";
  if (ft) {
    if (glue_configs().count(f.finetune->task)) o << "- glue\n";
    o << "- " << q(f.finetune->task) << "\n";
  }
  // model-index: the figures as numbers (huggingface_hub reads them as EvalResult).
  std::ostringstream results;
  if (ft && !f.finetune->reported.empty()) {
    const auto it = glue_configs().find(f.finetune->task);
    for (const auto& [split, values] : f.finetune->reported) {
      if (values.empty()) continue;
      results << "  - task:\n      type: text-classification\n      name: " << q(f.finetune->task) << "\n";
      results << "    dataset:\n";
      if (it != glue_configs().end())
        results << "      type: nyu-mll/glue\n      name: " << q("GLUE " + f.finetune->task) << "\n      config: "
                << it->second << "\n";
      else
        results << "      type: " << q(f.finetune->task) << "\n      name: " << q(f.finetune->task) << "\n";
      results << "      split: " << q(hub_split(split)) << "\n    metrics:\n";
      for (const auto& [name, v] : values)
        results << "    - type: " << q(hub_metric(name)) << "\n      name: " << q(name + " (" + split + ")") << "\n      value: "
                << yaml_number(v) << "\n";
    }
  } else if (!ft && f.pretrain.validation_loss) {
    const double loss = *f.pretrain.validation_loss;
    results << "  - task:\n      type: fill-mask\n      name: masked language modelling\n";
    results << "    dataset:\n      type: tupe-pretrain-shard\n      name: "
            << q(f.pretrain.corpus.validation_shards.empty() ? "validation shards" : shown(f.pretrain.corpus.validation_shards))
            << "\n      split: validation\n    metrics:\n";
    results << "    - type: loss\n      name: \"MLM validation loss (nats per masked token)\"\n      value: " << yaml_number(loss)
            << "\n    - type: perplexity\n      name: \"MLM validation perplexity\"\n      value: " << yaml_number(std::exp(loss))
            << "\n";
  }
  if (!results.str().empty()) o << "model-index:\n- name: " << q(how.name) << "\n  results:\n" << results.str();
  o << "---\n\n";
}

void row(std::ostringstream& o, const std::string& what, const std::string& value) {
  o << "| " << what << " | " << value << " |\n";
}

void model_section(std::ostringstream& o, const CardFacts& f, const CardExport& how) {
  const model::ModelOptions& c = f.ckpt->config;
  o << "## Model\n\n| | |\n|---|---|\n";
  row(o, "variant", f.variant + " (`model.position_encoding = " + model::to_string(c.position_encoding) +
                        "`, `untie_cls = " + (c.untie_cls ? "true" : "false") + "`)");
  row(o, "layers", std::to_string(c.num_layers));
  row(o, "hidden size", std::to_string(c.hidden_size));
  row(o, "attention heads", std::to_string(c.num_heads));
  row(o, "FFN size", std::to_string(c.ffn_size));
  const bool computed = c.longest_sequence() > c.max_positions;  // RoPE, ALiBi, NoPE: no position table
  row(o, "max positions",
      std::to_string(c.max_positions) +
          (computed ? " (the length trained on; positions are computed, longer inputs run)" : ""));
  if (c.has_rotary()) row(o, "RoPE base", yaml_number(c.rope_base));
  row(o, "LayerNorm", std::string(c.layer_norm == model::LayerNormPlacement::kPost ? "post-LN" : "pre-LN") + ", eps " +
                          yaml_number(c.layer_norm_eps));
  row(o, "segment embedding", c.type_vocab_size > 0 ? std::to_string(c.type_vocab_size) + " types" : "none");
  row(o, "parameters", std::to_string(f.parameters) + " (" + grouped(f.parameters) + "; the checkpoint's tensors)");
  std::string vocab = std::to_string(c.vocab_size) + " tokens";
  if (!f.tokenizer_kind.empty()) vocab = (f.tokenizer_kind == "wordpiece" ? "WordPiece, " : "SentencePiece, ") + vocab;
  if (f.lower_case) vocab += *f.lower_case ? ", lower-cased (uncased)" : ", cased";
  if (!f.vocab_file.empty()) vocab += " (`" + std::filesystem::path(f.vocab_file).filename().string() + "`)";
  row(o, "vocabulary", vocab);
  if (!how.architecture.empty())
    row(o, "class", "`" + how.architecture + "`" +
                        (how.format == "hf-tupe" ? " (tupe's modeling code, `trust_remote_code=True`)" : " (transformers' own)"));
  o << "\n";
}

void pretrain_section(std::ostringstream& o, const PretrainFacts& p, const model::ModelOptions& c) {
  o << "## Pre-training\n\n";
  if (p.state_file.empty()) {
    o << "Not recorded here: " << p.unread << ".\n\n";
    return;
  }
  o << "From `" << shown(p.state_file) << "`.\n\n| | |\n|---|---|\n";
  row(o, "steps", std::to_string(p.step));
  if (p.origin) {
    const checkpoint::WeightsOrigin& w = *p.origin;
    row(o, "initialised from",
        "`" + shown(w.path) + "` (" +
            (w.format == "hf-bert" ? "Hugging Face " + w.architecture : "tupe checkpoint at step " + std::to_string(w.step)) +
            ", " + w.position_encoding + ", " + std::to_string(w.max_positions) + " positions; model.safetensors SHA-256 " +
            w.weights_sha256.substr(0, 16) + "...); the steps above are this run's");
  }
  row(o, "global batch", p.global_batch > 0 ? std::to_string(p.global_batch) + " sequences" : "not recorded");
  if (p.global_batch > 0) {
    const int64_t seen = p.sequences_seen();
    row(o, "sequences seen", std::to_string(seen) + " (steps x global batch; data position: epoch " + std::to_string(p.epoch) +
                                 ", " + std::to_string(p.consumed_samples) + " sequences into it)");
    const int64_t longest = p.corpus.max_seq_len > 0 ? p.corpus.max_seq_len : c.max_positions;
    std::string tokens = "at most " + grouped(seen * longest) + " (sequences seen x " + std::to_string(longest) + " tokens)";
    if (p.corpus.sequences > 0) {
      const double mean = static_cast<double>(p.corpus.tokens) / static_cast<double>(p.corpus.sequences);
      tokens = "about " + grouped(std::llround(mean * static_cast<double>(seen))) + " (sequences seen x the shards' mean of " +
               fixed(mean, 1) + " tokens per sequence); " + tokens;
    }
    row(o, "tokens seen", tokens);
  }
  row(o, "ranks", std::to_string(p.world_size));
  if (!p.optimizer.empty())
    row(o, "optimizer", p.optimizer + ", peak LR " + p.lr + ", " + p.schedule + " schedule, warm-up " + p.warmup_steps +
                            " of " + p.total_steps + " steps");
  if (!p.precision.empty()) row(o, "precision", p.precision);
  if (p.train_loss) row(o, "training loss (MLM, last logged)", fixed(*p.train_loss, 4) + " at step " + std::to_string(p.train_loss_step));
  if (p.validation_loss)
    row(o, "validation loss (MLM)", fixed(*p.validation_loss, 4) + " nats per masked token at step " +
                                        std::to_string(p.validation_step) + " (perplexity " + fixed(std::exp(*p.validation_loss), 2) + ")");
  row(o, "metrics", p.metrics_file.empty() ? "no metrics file found" : "`" + shown(p.metrics_file) + "`");
  const CorpusFacts& k = p.corpus;
  o << "\n### Corpus\n\n";
  if (!k.unread.empty()) {
    o << "Training shards `" << shown(k.train_shards) << "`: " << k.unread << ".\n\n";
    return;
  }
  o << "Training shards `" << shown(k.train_shards) << "` (validation: `" << shown(k.validation_shards) << "`), as their headers record them: "
    << k.files << " file(s), " << grouped(k.sequences) << " sequences, " << grouped(k.tokens) << " tokens; sequences of up to "
    << k.max_seq_len << " tokens, packing " << k.packing << ", documents " << k.documents << "; " << k.tokenizer_kind
    << (k.lower_case ? ", lower-cased" : ", cased") << ".";
  if (!k.run_id.empty()) o << " Preprocess run " << k.run_id << ".";
  o << "\n\n";
  if (!k.command_line.empty())
    o << "Made by" << (k.command_lines_differ ? " (the first file; the others record other command lines)" : "")
      << ":\n\n```\n" << shown_command(k.command_line) << "\n```\n\n";
}

void finetune_section(std::ostringstream& o, const FinetuneFacts& f) {
  o << "## Fine-tuning\n\n| | |\n|---|---|\n";
  row(o, "task", f.task);
  std::string labels;
  for (const auto& l : f.labels) labels += (labels.empty() ? "" : ", ") + l;
  row(o, "labels", labels.empty() ? "regression (one output)" : labels);
  row(o, "max length", f.max_length + " tokens");
  row(o, "run", "LR " + f.lr + ", seed " + f.seed + ", epoch " + f.selected_epoch + " selected");
  row(o, "pre-trained checkpoint", "`" + shown(f.pretrain_checkpoint) + "`");
  o << "\n## GLUE results\n\n";
  if (f.results_file.empty()) {
    o << "No results.json of this model was found beside it.\n\n";
    return;
  }
  o << "From `" << shown(f.results_file) << "`: the median over seeds at the best learning rate (" << yaml_number(f.best_lr) << "), "
    << f.epochs << " epochs, " << f.train_rows << " training rows; primary metric " << f.primary_metric << ".\n\n";
  o << "| split | metric | value |\n|---|---|---|\n";
  for (const auto& [split, values] : f.reported)
    for (const auto& [name, v] : values) o << "| " << split << " | " << name << " | " << yaml_number(v) << " |\n";
  o << "\n";
}

void loading_section(std::ostringstream& o, const CardFacts& f, const CardExport& how) {
  const bool ft = f.finetune.has_value();
  o << "## How to load\n\n";
  // The folder as given when relative; by its name when absolute (run from its parent folder).
  const std::string path = q(std::filesystem::path(how.path).is_absolute() ? how.name : how.path);
  if (how.format == "tupe") {
    o << "tupe's own layout (not a transformers folder): `model.safetensors` under tupe's tensor names and `config.json` "
         "describing every tensor.\n\n```python\nfrom safetensors.torch import load_file\nimport json, os\n\n"
      << "tensors = load_file(os.path.join(" << path << ", \"model.safetensors\"))\nconfig = json.load(open(os.path.join(" << path
      << ", \"config.json\")))\n```\n\n`tupe export --format hf` writes a folder transformers loads.\n";
    return;
  }
  const std::string remote = how.format == "hf-tupe" ? ", trust_remote_code=True" : "";
  const std::string auto_class = ft ? "AutoModelForSequenceClassification" : "AutoModelForMaskedLM";
  if (how.format == "hf-tupe")
    o << "The folder carries tupe's modeling code (`configuration_tupe.py`, `modeling_tupe.py`), so transformers needs "
         "`trust_remote_code=True`.\n\n";
  o << "```python\nfrom transformers import AutoModel, " << auto_class << ", AutoTokenizer, pipeline\n\n";
  o << "model = " << auto_class << ".from_pretrained(" << path << remote << ")\n";
  o << "encoder = AutoModel.from_pretrained(" << path << remote << ")  # the encoder alone\n";
  if (how.tokenizer) {
    o << "tokenizer = AutoTokenizer.from_pretrained(" << path << remote << ")\n\n";
    if (ft)
      o << "classify = pipeline(\"text-classification\", model=model, tokenizer=tokenizer)\n"
        << "print(classify(\"a gripping , funny and moving film .\"))\n";
    else
      o << "fill = pipeline(\"fill-mask\", model=model, tokenizer=tokenizer)\n"
        << "print(fill(\"the capital of france is [MASK] .\"))\n";
    o << "```\n";
  } else {
    o << "```\n\nNo tokenizer files: the export was given no vocabulary (`tupe export --vocab`).\n";
  }
}

}  // namespace

std::string yaml_number(double v) {
  if (!std::isfinite(v)) return "null";
  std::string s = nlohmann::json(v).dump();
  if (s.find('.') == std::string::npos) {
    const size_t e = s.find_first_of("eE");
    s = e == std::string::npos ? s + ".0" : s.substr(0, e) + ".0" + s.substr(e);
  }
  return s;
}

std::string model_card_markdown(const CardFacts& f, const CardExport& how) {
  std::ostringstream o;
  metadata(o, f, how);
  const bool ft = f.finetune.has_value();
  o << "# " << how.name << "\n\n";
  o << "A " << f.variant << " BERT encoder" << (ft ? " fine-tuned on " + f.finetune->task : " pre-trained with masked language modelling")
    << ", trained with tupe (TUPE: Ke, He, Liu, \"Rethinking Positional Encoding in Language Pre-training\", ICLR 2021). "
    << "Exported by `tupe export` (format " << how.format << ") from `" << shown(f.ckpt->dir.string()) << "` (step " << f.ckpt->step()
    << "). This card is generated from what that checkpoint records.\n\n";
  model_section(o, f, how);
  if (ft) finetune_section(o, *f.finetune);
  pretrain_section(o, f.pretrain, f.ckpt->config);
  loading_section(o, f, how);
  return o.str();
}

}  // namespace tupe::exporting
