#include "tools/analyze/analysis.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "checkpoint/durable_io.h"
#include "checkpoint/model_checkpoint.h"
#include "checkpoint/safetensors.h"
#include "common/error.h"
#include "model/attention.h"
#include "tools/analyze/analyze_plots_source.h"
#include "tools/analyze/mlm_by_position.h"
#include "tools/analyze/plot_script.h"

namespace tupe::analyze {
namespace fs = std::filesystem;

namespace {

/// (L, d) -> (H, L, d_h) through a Linear's weight (no bias): rows x W^T, split by head.
at::Tensor project_heads(const at::Tensor& rows, const at::Tensor& weight, const at::Tensor& bias, int64_t H) {
  const int64_t n = rows.size(0), d = weight.size(0);
  return at::linear(rows, weight, bias).view({n, H, d / H}).transpose(0, 1);
}

/// The BERT-A / BERT-A^d terms of the first layer (analysis.h): positional_term,
/// word_to_position, position_to_word.
checkpoint::NamedTensors bert_absolute_terms(model::TupeBertImpl& net, int64_t L) {
  const auto& c = net.config;
  const int64_t H = c.num_heads;
  const double scale = c.attention_scale();  // 1/sqrt(d_h); BERT-A^d: 1/sqrt(4 d_h)
  auto layer0 = net.encoder->layers->ptr(0)->as<model::EncoderLayerImpl>();
  const auto& q = layer0->attention->query;
  const auto& k = layer0->attention->key;
  const at::Tensor w_mean = net.encoder->embeddings->word->weight.mean(0, true);    // (1, d)
  at::Tensor qp, kp;  // (H, L, dh): the positions as the first layer's q and k see them
  if (c.has_positional_query_key()) {
    std::tie(qp, kp) = net.encoder->positional->query_key(L);  // LN(p) U^Q + c^Q, LN(p) U^K + c^K
  } else {
    const at::Tensor p = net.encoder->embeddings->position->weight.narrow(0, 0, L);  // (L, d)
    qp = project_heads(p, q->weight, {}, H);
    kp = project_heads(p, k->weight, {}, H);
  }
  const at::Tensor qw = project_heads(w_mean, q->weight, q->bias, H);                                  // (H, 1, dh)
  const at::Tensor kw = project_heads(w_mean, k->weight, k->bias, H);                                  // (H, 1, dh)
  checkpoint::NamedTensors out;
  out.emplace_back("positional_term", at::matmul(qp, kp.transpose(1, 2)) * scale);
  out.emplace_back("word_to_position", (at::matmul(qw, kp.transpose(1, 2)) * scale).squeeze(1));
  out.emplace_back("position_to_word", (at::matmul(qp, kw.transpose(1, 2)) * scale).squeeze(2));
  return out;
}

/// RoPE's first-layer positional term (analysis.h): the mean word's query and key of the first
/// layer, each rotated to every position, PP_h[i, j] = R_i(w̄ W^Q_h + b^Q_h) . R_j(w̄ W^K_h + b^K_h)
/// / sqrt(d_h): (H, L, L).
checkpoint::NamedTensors rotary_terms(model::TupeBertImpl& net, int64_t L) {
  const auto& c = net.config;
  auto layer0 = net.encoder->layers->ptr(0)->as<model::EncoderLayerImpl>();
  const auto& q = layer0->attention->query;
  const auto& k = layer0->attention->key;
  const at::Tensor w_mean = net.encoder->embeddings->word->weight.mean(0, true);  // (1, d)
  const auto [cos, sin] = net.encoder->positional->rotary(L, w_mean.options());  // (L, dh) each
  const int64_t H = c.num_heads, dh = c.head_size();
  const at::Tensor qw = project_heads(w_mean, q->weight, q->bias, H).expand({H, L, dh});  // (H, L, dh)
  const at::Tensor kw = project_heads(w_mean, k->weight, k->bias, H).expand({H, L, dh});
  const at::Tensor qr = model::apply_rotary(qw, cos, sin), kr = model::apply_rotary(kw, cos, sin);
  return {{"positional_term", at::matmul(qr, kr.transpose(1, 2)) * c.attention_scale()}};
}

/// True for the encodings with learned position vectors for the probes (all but RoPE, ALiBi, NoPE).
bool has_position_table(const model::ModelOptions& c) {
  return c.has_absolute_input_positions() || c.has_position_projections();
}

/// The learned position vectors and the positions they serve (analysis.h).
checkpoint::NamedTensors position_table(model::TupeBertImpl& net) {
  const auto& c = net.config;
  at::Tensor table;
  int64_t first_row = 0, first_position = 0;
  if (c.has_position_projections()) {
    table = net.encoder->positional->table->weight;
    if (c.has_untied_positions() && c.untie_cls) first_row = 2, first_position = 1;  // row t + 1 serves position t >= 1
  } else {
    table = net.encoder->embeddings->position->weight;
  }
  const int64_t n = table.size(0) - first_row;
  return {{"table", table.narrow(0, first_row, n).contiguous()},
          {"positions", at::arange(first_position, first_position + n, at::kLong)}};
}

void write_text(const fs::path& path, const std::string& text) { checkpoint::write_file_atomic(path, text); }

/// The buckets as a Markdown table ("" without them).
std::string by_position_table(const std::vector<BucketSums>& sums) {
  if (sums.empty()) return "";
  std::ostringstream md;
  md << "\nMasked-LM loss and accuracy by position (validation):\n\n| positions | masked | loss | accuracy |\n"
     << "|---|---|---|---|\n";
  char line[128];
  for (size_t k = 0; k < sums.size(); ++k) {
    if (sums[k].masked == 0) continue;
    const auto [first, last] = bucket_range(static_cast<int64_t>(k));
    const double n = static_cast<double>(sums[k].masked);
    std::snprintf(line, sizeof line, "| %lld-%lld | %lld | %.4f | %.4f |\n", static_cast<long long>(first),
                  static_cast<long long>(last), static_cast<long long>(sums[k].masked), sums[k].loss_sum / n,
                  static_cast<double>(sums[k].correct) / n);
    md << line;
  }
  return md.str();
}

/// The length rows as a Markdown table ("" without them).
std::string by_length_table(const std::vector<LengthRow>& rows) {
  if (rows.empty()) return "";
  std::ostringstream md;
  md << "\nMasked-LM loss and accuracy by sequence length:\n\n| shards | longest sequence | masked | loss | accuracy |\n"
     << "|---|---|---|---|---|\n";
  char cells[96];
  for (const LengthRow& r : rows) {
    md << "| " << r.shards << " | " << r.max_seq_len << " | ";
    if (r.total.masked > 0) {
      const double n = static_cast<double>(r.total.masked);
      std::snprintf(cells, sizeof cells, "%lld | %.4f | %.4f |\n", static_cast<long long>(r.total.masked),
                    r.total.loss_sum / n, static_cast<double>(r.total.correct) / n);
      md << cells;
    } else {
      md << "- | " << r.note << " | |\n";
    }
  }
  return md.str();
}

}  // namespace

std::string metrics_jsonl_to_csv(const fs::path& path) {
  std::ostringstream csv;
  csv.precision(9);
  csv << "step,loss,lr,validation_loss\n";
  for_each_metrics_record(path, [&](const nlohmann::json& j, int64_t line_no) {
    if (j.contains("event")) return;  // the start record: no numbers
    auto field = [&](const char* key) -> std::string {
      if (!j.contains(key) || j[key].is_null()) return "";
      TUPE_CHECK(j[key].is_number(), path.string() << ":" << line_no << ": \"" << key << "\" is not a number");
      std::ostringstream v;
      v.precision(9);
      v << j[key].get<double>();
      return v.str();
    };
    csv << j["step"].get<int64_t>() << "," << field("loss") << "," << field("lr") << "," << field("validation_loss")
        << "\n";
  });
  return csv.str();
}

std::string analyze_checkpoint(const AnalyzeOptions& options) {
  TUPE_CHECK(!options.output.empty(), "--output: missing");
  TUPE_CHECK(options.heatmap_positions >= 2, "--positions: " << options.heatmap_positions << " is below 2");
  const checkpoint::ModelCheckpoint ckpt = checkpoint::read_model_checkpoint(options.checkpoint);
  TUPE_CHECK(ckpt.has_mlm_head || (options.validation_shards.empty() && options.length_shards.empty()),
             ckpt.dir.string() << ": no MLM head (mlm_head.*): a fine-tuned model keeps only its sentence head, so "
                                  "--validation-shards and --length-shards cannot score masked tokens; give the "
                                  "pre-training checkpoint it was fine-tuned from");
  model::TupeBert net = checkpoint::build_model(ckpt);
  const auto& c = ckpt.config;
  const int64_t L = std::min(options.heatmap_positions, c.max_positions);
  fs::path metrics = options.metrics;
  if (metrics.empty()) {
    const auto& cfg = ckpt.contents.state.config;
    const auto md = cfg.find("train.metrics_dir");
    const fs::path dir = (md != cfg.end() && !md->second.empty()) ? fs::path(md->second) : ckpt.dir.parent_path() / "metrics";
    if (fs::exists(dir / "rank_0.jsonl")) metrics = dir / "rank_0.jsonl";
  }
  const bool have_curves = !metrics.empty();
  // Parsed before anything is written: a bad metrics file leaves no partial analysis.
  const std::string curves_csv = have_curves ? metrics_jsonl_to_csv(metrics) : std::string();
  // So are the shards scored: bad shards leave nothing either.
  const int64_t eval_batches = options.eval_batches >= 0 ? options.eval_batches : run_eval_batches(ckpt);
  const std::vector<BucketSums> by_position =
      options.validation_shards.empty() ? std::vector<BucketSums>{}
                                        : mlm_by_position(ckpt, options.validation_shards, eval_batches);
  std::vector<LengthRow> by_length;
  for (const std::string& shards : options.length_shards)
    by_length.push_back(mlm_at_length(ckpt, shards, eval_batches));

  fs::create_directories(options.output);
  if (have_curves) write_text(options.output / "curves.csv", curves_csv);
  else fs::remove(options.output / "curves.csv");
  if (!by_position.empty()) write_text(options.output / "mlm_by_position.csv", by_position_csv(by_position));
  else fs::remove(options.output / "mlm_by_position.csv");
  if (!by_length.empty()) write_text(options.output / "mlm_by_length.csv", by_length_csv(by_length));
  else fs::remove(options.output / "mlm_by_length.csv");

  at::NoGradGuard no_grad;
  checkpoint::NamedTensors terms;
  if (c.has_positional_logit_term()) {  // TUPE-A/R, BERT-R, ALiBi: the term every layer adds
    terms.emplace_back("positional_term", net->encoder->positional->forward(L));
  } else if (c.has_rotary()) {
    terms = rotary_terms(*net, L);
  } else if (c.position_encoding == model::PositionEncoding::kNone) {  // NoPE: no positional term, zero
    terms.emplace_back("positional_term", at::zeros({c.num_heads, L, L}));
  } else {  // BERT-A, BERT-A^d: the terms of the logits, computed from the layers
    terms = bert_absolute_terms(*net, L);
  }
  for (auto& [name, t] : terms) t = t.to(at::kFloat).contiguous();
  const std::string variant = model::to_string(c.position_encoding);
  checkpoint::write_safetensors(options.output / "positional.safetensors", terms,
                             {{"position_encoding", variant}, {"untie_cls", c.untie_cls ? "true" : "false"}});
  const bool with_table = has_position_table(c);
  if (with_table)
    checkpoint::write_safetensors(options.output / "position_table.safetensors", position_table(*net),
                                  {{"position_encoding", variant}});
  else
    fs::remove(options.output / "position_table.safetensors");

  nlohmann::json info = {{"checkpoint", ckpt.dir.string()},         {"step", ckpt.contents.state.step},
                         {"position_encoding", variant},             {"untie_cls", c.untie_cls},
                         {"num_heads", c.num_heads},                 {"heatmap_positions", L},
                         {"metrics", have_curves ? metrics.string() : ""}, {"seed", options.seed},
                         {"mlm_by_position", by_position.empty() ? "" : "mlm_by_position.csv"},
                         {"mlm_by_length", by_length.empty() ? "" : "mlm_by_length.csv"},
                         {"position_table", with_table ? "position_table.safetensors" : ""}};
  write_text(options.output / "analysis_input.json", info.dump(2) + "\n");

  const std::string script = run_plot_script(plotting_python(options.python), options.script, "analyze_plots.py",
                                             kAnalyzePlotsPy, options.output);
  const fs::path table = options.output / "probes.md";
  TUPE_CHECK(fs::exists(table), script << ": did not write " << table.string());
  return checkpoint::read_file_bytes(table) + by_position_table(by_position) + by_length_table(by_length);
}

}  // namespace tupe::analyze
