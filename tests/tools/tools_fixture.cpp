// tools_fixture: checkpoints and reference numbers for the tests of `tupe export` / `tupe analyze`.
//   tools_fixture make DIR VARIANT TABLE VOCAB
//       writes DIR/step_00000100 (CheckpointStore) of a tiny TupeBert (V = 30522, d = 32,
//       2 layers, 4 heads, max_positions 128) whose every parameter is perturbed by N(0, 0.05)
//       (LayerNorm scales and biases are not at their init, so a mis-mapped tensor shows);
//       VARIANT: bert-absolute | bert-relative | tupe-absolute | tupe-relative | bert-absolute-untied
//       ([CLS] untied for TUPE, not for BERT);
//       TABLE: init | sinusoidal (position table = Vaswani et al. sinusoids of the position a
//       row serves, computed in float64) ; VOCAB: the vocabulary whose SHA-256 is recorded.
//   tools_fixture logits CKPT OUT.safetensors
//       loads CKPT with tupe's loader and writes "input_ids" (2, 40) int64, "attention_mask"
//       (2, 40) int64 (row 1 padded from 30) and "logits" (80, V) float32: MLM logits at every
//       position, from TupeBert::mlm_logits.
//   tools_fixture forward CKPT OUT.safetensors [IN.safetensors]
//       tupe's own forward pass of a checkpoint of `tupe pretrain` or a model of `tupe finetune`
//       (checkpoint::read_model_checkpoint + build_model, eval mode, float32) on 2 rows of L = max_positions
//       random ids in [5, V), row 1 padded from L/2 + 3, or on IN's "input_ids" and
//       "attention_mask" (B, L) int64 (e.g. a transformers tokenizer's; its segment ids are
//       not read: tupe's paper models have none): "input_ids", "attention_mask" (B, L)
//       int64, "hidden_<i>" (2, L, d) the input of layer i, "last_hidden" (2, L, d) the encoder
//       output, "mlm_logits" (2 L, V) at every position (with an MLM head), "sentence_logits"
//       (2, C) (with a sentence head).
//   tools_fixture tokenize KIND VOCAB LOWER_CASE TEXT OUT.json
//       tupe's tokenizer (wordpiece | sentencepiece) on each line of TEXT (CR/LF stripped,
//       empty lines skipped): {"lines": [...], "ids": [[...], ...]} without special tokens, and
//       {"special": {"cls": id, ...}}.
#include <ATen/ATen.h>

#include <cmath>
#include <cstdio>
#include <exception>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint_store.h"
#include "checkpoint/model_checkpoint.h"
#include "checkpoint/safetensors.h"
#include "common/sha256.h"
#include "data_pipeline/text/tokenizer_factory.h"
#include "model/tupe_bert.h"

namespace {

using namespace tupe;

/// PE[t, 2k] = sin(t / 10000^(2k/d)), PE[t, 2k+1] = cos(t / 10000^(2k/d)) for the given positions.
at::Tensor sinusoids(const at::Tensor& positions, int64_t d) {
  at::Tensor t = positions.to(at::kDouble).unsqueeze(1);
  at::Tensor k = at::arange(0, d, 2, at::kDouble);
  at::Tensor angle = t / at::pow(10000.0, k / static_cast<double>(d));
  at::Tensor pe = at::zeros({positions.size(0), d}, at::kDouble);
  pe.index_put_({at::indexing::Slice(), at::indexing::Slice(0, d, 2)}, at::sin(angle));
  pe.index_put_({at::indexing::Slice(), at::indexing::Slice(1, d, 2)}, at::cos(angle));
  return pe.to(at::kFloat);
}

int make(const std::string& dir, const std::string& variant, const std::string& table, const std::string& vocab) {
  model::ModelOptions c;
  c.vocab_size = 30522;
  c.hidden_size = 32;
  c.num_layers = 2;
  c.num_heads = 4;
  c.ffn_size = 64;
  c.max_positions = 128;
  c.type_vocab_size = 0;
  c.position_encoding = model::parse_position_encoding(variant);
  c.untie_cls = c.has_untied_positions();
  c.validate();
  at::manual_seed(11);
  model::TupeBert net(c);
  checkpoint::CheckpointContents contents;
  {
    at::NoGradGuard no_grad;
    for (const auto& item : net->named_parameters()) {
      at::Tensor p = item.value();
      p.add_(at::randn_like(p) * 0.05);
      contents.model.emplace_back(item.key(), p.detach());
    }
    if (table == "sinusoidal") {
      if (c.has_position_projections()) {
        at::Tensor w = net->encoder->positional->table->weight;
        const int64_t first = c.untie_cls ? 2 : 0, first_pos = c.untie_cls ? 1 : 0;
        const int64_t n = w.size(0) - first;
        w.narrow(0, first, n).copy_(sinusoids(at::arange(first_pos, first_pos + n, at::kLong), c.hidden_size));
      } else {
        at::Tensor w = net->encoder->embeddings->position->weight;
        w.copy_(sinusoids(at::arange(0, w.size(0), at::kLong), c.hidden_size));
      }
    } else if (table != "init") {
      throw Error("TABLE '" + table + "': expected init or sinusoidal");
    }
  }
  contents.optimizer.metadata = {{"optimizer", "adamw"}};
  contents.state.step = 100;
  contents.state.scheduler_step = 100;
  for (const auto& [k, v] : model::ModelOptions::fields().to_kv(c)) contents.state.config["model." + k] = v;
  contents.state.config["tokenizer.lower_case"] = "true";
  contents.state.vocab_sha256 = file_sha256_hex(vocab);
  checkpoint::CheckpointOptions options;
  options.dir = dir;
  options.keep_last = 0;
  options.keep_every = 0;
  checkpoint::CheckpointStore store(options);
  std::printf("wrote %s\n", store.save(contents).string().c_str());
  return 0;
}

int logits(const std::string& ckpt_dir, const std::string& out) {
  const auto ckpt = checkpoint::read_model_checkpoint(ckpt_dir);
  model::TupeBert net = checkpoint::build_model(ckpt);
  at::manual_seed(7);
  const int64_t B = 2, L = 40;
  at::Tensor ids = at::randint(1000, ckpt.config.vocab_size, {B, L}, at::kLong);
  ids.select(1, 0).fill_(101);  // [CLS]
  at::Tensor mask = at::ones({B, L}, at::kLong);
  mask.select(0, 1).narrow(0, 30, L - 30).zero_();
  at::NoGradGuard no_grad;
  at::Tensor y = net->mlm_logits(ids, mask, {}, at::arange(B * L, at::kLong));
  checkpoint::write_safetensors(out, {{"input_ids", ids}, {"attention_mask", mask}, {"logits", y.to(at::kFloat)}});
  std::printf("wrote %s\n", out.c_str());
  return 0;
}

int forward(const std::string& ckpt_dir, const std::string& out, const std::string& in = "") {
  const auto ckpt = checkpoint::read_model_checkpoint(ckpt_dir);
  model::TupeBert net = checkpoint::build_model(ckpt);
  int64_t B = 2, L = ckpt.config.max_positions;
  at::manual_seed(5);
  at::Tensor ids = at::randint(5, ckpt.config.vocab_size, {B, L}, at::kLong);
  at::Tensor mask = at::ones({B, L}, at::kLong);
  mask.select(0, 1).narrow(0, L / 2 + 3, L - L / 2 - 3).zero_();
  if (!in.empty()) {
    ids = mask = at::Tensor();
    for (const auto& [name, t] : checkpoint::read_safetensors(in).tensors) {
      if (name == "input_ids") ids = t.to(at::kLong);
      if (name == "attention_mask") mask = t.to(at::kLong);
    }
    if (!ids.defined() || !mask.defined() || ids.dim() != 2 || !ids.sizes().equals(mask.sizes()))
      throw Error(in + ": expected input_ids and attention_mask of one shape (B, L)");
    B = ids.size(0);
    L = ids.size(1);
  }
  at::NoGradGuard no_grad;
  const model::EncoderOutput enc = net->encoder->forward(ids, mask, {}, /*record_layers=*/true);
  checkpoint::NamedTensors tensors = {{"input_ids", ids}, {"attention_mask", mask}, {"last_hidden", enc.hidden}};
  for (size_t i = 0; i < enc.layer_inputs.size(); ++i)
    tensors.emplace_back("hidden_" + std::to_string(i), enc.layer_inputs[i].contiguous());
  if (ckpt.has_mlm_head)
    tensors.emplace_back("mlm_logits", net->mlm_logits(ids, mask, {}, at::arange(B * L, at::kLong)));
  if (ckpt.num_labels > 0) tensors.emplace_back("sentence_logits", net->sentence_logits(ids, mask, {}));
  checkpoint::write_safetensors(out, tensors);
  std::printf("wrote %s\n", out.c_str());
  return 0;
}

int tokenize(const std::string& kind, const std::string& vocab, const std::string& lower, const std::string& text,
             const std::string& out) {
  data_pipeline::TokenizerOptions options;
  options.kind = data_pipeline::parse_tokenizer_kind("KIND", kind);
  options.vocab = vocab;
  options.lower_case = lower == "true";
  options.validate();
  const auto tokenizer = data_pipeline::make_tokenizer(options);
  std::ifstream in(text, std::ios::binary);
  if (!in) throw Error(text + ": cannot read");
  nlohmann::json lines = nlohmann::json::array(), ids = nlohmann::json::array();
  std::string line;
  while (std::getline(in, line)) {
    while (!line.empty() && (line.back() == '\r' || line.back() == '\n')) line.pop_back();
    if (line.empty()) continue;
    lines.push_back(line);
    ids.push_back(tokenizer->encode(line));
  }
  const data_pipeline::SpecialTokens sp = tokenizer->special_tokens();
  const nlohmann::json doc = {
      {"lines", lines},
      {"ids", ids},
      {"special", {{"pad", sp.pad}, {"unk", sp.unk}, {"cls", sp.cls}, {"sep", sp.sep}, {"mask", sp.mask}}}};
  std::ofstream o(out, std::ios::binary);
  o << doc.dump() << "\n";
  if (!o) throw Error(out + ": write failed");
  std::printf("wrote %s (%zu lines)\n", out.c_str(), lines.size());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::string mode = argc > 1 ? argv[1] : "";
    if (mode == "make" && argc == 6) return make(argv[2], argv[3], argv[4], argv[5]);
    if (mode == "logits" && argc == 4) return logits(argv[2], argv[3]);
    if (mode == "forward" && (argc == 4 || argc == 5)) return forward(argv[2], argv[3], argc == 5 ? argv[4] : "");
    if (mode == "tokenize" && argc == 7) return tokenize(argv[2], argv[3], argv[4], argv[5], argv[6]);
    std::fprintf(stderr,
                 "usage: tools_fixture make DIR VARIANT TABLE VOCAB | logits CKPT OUT.safetensors | forward CKPT "
                 "OUT.safetensors [IN.safetensors] | tokenize KIND VOCAB LOWER_CASE TEXT OUT.json\n");
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tools_fixture: %s\n", e.what());
    return 1;
  }
}
