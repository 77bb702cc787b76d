#include "checkpoint/warm_start.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/grad_mode.h>

#include <cmath>
#include <map>
#include <set>

#include "common/error.h"

namespace tupe::checkpoint {

namespace {

using model::PositionEncoding;

bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

/// "the HF BertModel folder X" / "the step 1200 checkpoint X": the source in messages.
std::string source_name(const ModelCheckpoint& s) {
  if (s.from_hf()) return "the Hugging Face " + s.hf_architecture + " " + s.dir.string();
  return "the checkpoint " + s.dir.string() + " (step " + std::to_string(s.step()) + ")";
}

/// Whether a retrofit from `from` to `to` is one tupe knows (warm_start.h).
bool retrofit_allowed(PositionEncoding from, PositionEncoding to) {
  return from == PositionEncoding::kBertAbsolute &&
         (to == PositionEncoding::kTupeAbsolute || to == PositionEncoding::kTupeRelative ||
          to == PositionEncoding::kBertRelative);
}

/// Row of position 0 in the variant's position table: 1 with TUPE's [CLS] untie (row 0 is
/// theta_1), else 0.
int64_t first_position_row(const model::ModelOptions& c) { return c.has_untied_positions() && c.untie_cls ? 1 : 0; }

}  // namespace

at::Tensor extend_position_rows(const at::Tensor& trained, int64_t rows, int64_t first) {
  const int64_t rows_src = trained.size(0);
  TUPE_CHECK(rows >= rows_src, "position table: " << rows << " rows asked of a table of " << rows_src);
  TUPE_CHECK(first >= 0 && first < rows_src, "position table: first position row " << first << " of " << rows_src);
  const int64_t positions_src = rows_src - first;
  std::vector<int64_t> index(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) index[static_cast<size_t>(r)] = r < first ? r : first + (r - first) % positions_src;
  return trained.index_select(0, at::tensor(index, at::kLong));
}

WarmStartPlan plan_warm_start(const ModelCheckpoint& source, const model::ModelOptions& requested,
                              const KeyValues& given) {
  WarmStartPlan plan;
  const model::ModelOptions& s = source.config;
  plan.source_config = s;
  model::ModelOptions c = s;
  const auto& table = model::ModelOptions::fields();
  const KeyValues src_kv = table.to_kv(s), run_kv = table.to_kv(requested);
  const auto where = [&](const std::string& key) {
    const auto it = given.find("model." + key);
    return it == given.end() ? std::string() : it->second;
  };
  const auto differs = [&](const std::string& key) { return !where(key).empty() && src_kv.at(key) != run_kv.at(key); };
  const auto refuse = [&](const std::string& key, const std::string& why) {
    TUPE_FAIL("model." << key << ": " << run_kv.at(key) << " (" << where(key) << ") contradicts the source's "
                       << src_kv.at(key) << " (" << source_name(source) << "); " << why);
  };
  const std::string shape_rule = "the model's shape comes from train.init_from: leave the key out";

  // The variant first: the retrofit decides what the [CLS] and bucket keys mean.
  if (differs("position_encoding")) {
    if (!retrofit_allowed(s.position_encoding, requested.position_encoding))
      refuse("position_encoding", "a source continues as its own variant, or a bert-absolute one as tupe-absolute, "
                                  "tupe-relative or bert-relative (the retrofit, docs/warm-start.md)");
    c.position_encoding = requested.position_encoding;
    plan.retrofit = true;
  }
  for (const auto& f : table.fields()) {
    const std::string& key = f.name;
    if (key == "position_encoding") continue;
    if (key == "hidden_dropout" || key == "attention_dropout" || key == "init_std") {
      if (!where(key).empty()) table.apply(c, {{key, run_kv.at(key)}}, "model");
      continue;
    }
    if (key == "vocab_size") {
      if (differs(key) && requested.vocab_size != 0) refuse(key, shape_rule);
      continue;
    }
    if (key == "max_positions") {
      if (!where(key).empty() && requested.max_positions < s.max_positions)
        refuse(key, "a warm start may lengthen the positions, not shorten them");
      if (!where(key).empty() && requested.max_positions > s.max_positions) {
        c.max_positions = requested.max_positions;
        plan.extended = true;
      }
      continue;
    }
    if (key == "untie_cls") {
      if (plan.retrofit) {  // the source had no [CLS] untie: the run's, else the variant's usual value
        c.untie_cls = where(key).empty() ? c.has_untied_positions() : requested.untie_cls;
      } else if (differs(key)) {
        refuse(key, shape_rule);
      }
      continue;
    }
    if (key == "relative_buckets" || key == "relative_max_distance") {
      if (s.has_relative_bias()) {
        if (differs(key)) refuse(key, "the source's relative bias was trained with these buckets");
      } else if (!where(key).empty()) {  // the source has no buckets: the run's (a retrofit to *-relative)
        table.apply(c, {{key, run_kv.at(key)}}, "model");
      }
      continue;
    }
    if (differs(key)) refuse(key, shape_rule);
  }
  try {
    c.validate();
  } catch (const Error& e) {
    TUPE_FAIL("train.init_from: the model from " << source_name(source) << ": " << e.what());
  }
  plan.config = c;
  if (plan.extended)
    plan.notes.push_back("model.max_positions " + std::to_string(s.max_positions) + " -> " +
                         std::to_string(c.max_positions) + ": position t >= " + std::to_string(s.max_positions) +
                         " starts as trained position t mod " + std::to_string(s.max_positions) +
                         " (Longformer's copy; docs/warm-start.md)");
  if (plan.retrofit)
    plan.notes.push_back("model.position_encoding " + model::to_string(s.position_encoding) + " -> " +
                         model::to_string(c.position_encoding) +
                         ": the retrofit (docs/warm-start.md): words, layers and head copied" +
                         (c.has_untied_positions()
                              ? ", W^Q x sqrt(2) for TUPE's scale, positions to TUPE's table, U^Q, U^K from layer 0"
                              : "") +
                         (c.has_relative_bias() ? ", the relative bias from zero" : ""));
  if (!source.has_mlm_head)
    plan.notes.push_back("the source has no MLM head: a fresh one (dense and LayerNorm at their init, decoder tied "
                         "to the word embedding, bias 0)");
  return plan;
}

void load_warm_start(model::TupeBertImpl& net, const ModelCheckpoint& source, const WarmStartPlan& plan) {
  torch::NoGradGuard no_grad;
  const std::string where = source.weights_file();
  const model::ModelOptions& to = plan.config;
  std::map<std::string, at::Tensor> src;
  for (const auto& [name, t] : source.contents.model)
    if (!starts_with(name, "sentence_head.")) src[name] = t;
  std::set<std::string> used;
  const auto take = [&](const std::string& name) {
    const auto it = src.find(name);
    TUPE_CHECK(it != src.end(), where << ": tensor '" << name << "' missing (needed by the new "
                                      << model::to_string(to.position_encoding) << " model)");
    used.insert(name);
    return it->second.to(at::kDouble);  // rules computed in float64, rounded once by copy_ into the target
  };
  // The word term's scale: TUPE's 1/sqrt(2 d_h) against BERT's 1/sqrt(d_h) (1 unless a retrofit to TUPE).
  const double q_gain = plan.source_config.attention_scale() / to.attention_scale();
  const bool to_tupe = plan.retrofit && to.has_untied_positions();
  for (const auto& item : net.named_parameters()) {
    const std::string& name = item.key();
    at::Tensor target = item.value();
    if (starts_with(name, "sentence_head.")) continue;  // pre-training has none
    if (starts_with(name, "mlm_head.") && !source.has_mlm_head) continue;  // fresh: the model's init
    at::Tensor value;
    if (name == "encoder.embeddings.position.weight") {
      value = extend_position_rows(take(name), to.max_positions, 0);
    } else if (name == "encoder.positional.table.weight") {
      if (to_tupe) {  // BERT's row t -> position t; with the untie, BERT's [CLS] row also plays theta_1
        const at::Tensor positions = extend_position_rows(take("encoder.embeddings.position.weight"), to.max_positions, 0);
        value = to.untie_cls ? at::cat({positions.narrow(0, 0, 1), positions}) : positions;
      } else {
        value = extend_position_rows(take(name), to.position_table_rows(), first_position_row(to));
      }
    } else if (to_tupe && starts_with(name, "encoder.positional.norm.")) {
      value = take("encoder.embeddings.norm." + name.substr(std::string("encoder.positional.norm.").size()));
    } else if (to_tupe && starts_with(name, "encoder.positional.query.")) {
      value = take("encoder.layers.0.attention.query." + name.substr(std::string("encoder.positional.query.").size())) *
              q_gain;
    } else if (to_tupe && starts_with(name, "encoder.positional.key.")) {
      value = take("encoder.layers.0.attention.key." + name.substr(std::string("encoder.positional.key.").size()));
    } else if (plan.retrofit && name == "encoder.positional.relative_bias.weight") {
      target.zero_();  // the bias starts at nothing: the source's logits unchanged
      continue;
    } else if (plan.retrofit && name.find(".attention.query.") != std::string::npos) {
      value = take(name) * q_gain;
    } else {
      value = take(name);
    }
    TUPE_CHECK(value.sizes() == target.sizes(), where << ": tensor '" << name << "': shape " << shape_text(value.sizes())
                                                      << ", the new model's " << shape_text(target.sizes()));
    target.copy_(value);
  }
  for (const auto& [name, t] : src)
    TUPE_CHECK(used.count(name), where << ": tensor '" << name << "' has no place in the new "
                                       << model::to_string(to.position_encoding) << " model");
}

}  // namespace tupe::checkpoint
