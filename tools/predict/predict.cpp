#include "tools/predict/predict.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/GradMode.h>
#include <torch/cuda.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <numeric>

#include <nlohmann/json.hpp>

#include "checkpoint/model_checkpoint.h"
#include "checkpoint/safetensors.h"
#include "common/config_fields.h"
#include "common/error.h"
#include "data_pipeline/text/tokenizer_factory.h"
#include "data_pipeline/text/sentencepiece_tokenizer.h"
#include "data_pipeline/text/wordpiece.h"
#include "tools/export/checkpoint_vocab.h"
#include "tools/export/hf_tokenizer.h"
#include "tools/predict/predict_input.h"
#include "trainer/autocast.h"

namespace tupe::predict {

namespace fs = std::filesystem;

namespace {

constexpr Choice<FillMaskFormat> kFormatWords[] = {{"jsonl", FillMaskFormat::kJsonl}, {"tsv", FillMaskFormat::kTsv}};
constexpr Choice<PredictPrecision> kPrecisionWords[] = {{"fp32", PredictPrecision::kFp32},
                                                        {"bf16", PredictPrecision::kBf16}};
constexpr Choice<PredictMode> kModeWords[] = {{"fill-mask", PredictMode::kFillMask},
                                              {"embeddings", PredictMode::kEmbeddings}};
constexpr Choice<Pooling> kPoolingWords[] = {{"cls", Pooling::kCls}, {"tokens", Pooling::kTokens}};

/// The autocast dtype of `p`.
at::ScalarType autocast_dtype(PredictPrecision p) { return p == PredictPrecision::kBf16 ? at::kBFloat16 : at::kFloat; }

}  // namespace

std::string to_string(FillMaskFormat f) { return choice_word(f, kFormatWords); }

FillMaskFormat parse_fill_mask_format(const std::string& option, const std::string& text) {
  return parse_choice(option, text, kFormatWords);
}

std::string to_string(PredictPrecision p) { return choice_word(p, kPrecisionWords); }

PredictPrecision parse_predict_precision(const std::string& option, const std::string& text) {
  return parse_choice(option, text, kPrecisionWords);
}

std::string to_string(PredictMode m) { return choice_word(m, kModeWords); }

PredictMode parse_predict_mode(const std::string& option, const std::string& text) {
  return parse_choice(option, text, kModeWords);
}

std::string to_string(Pooling p) { return choice_word(p, kPoolingWords); }

Pooling parse_pooling(const std::string& option, const std::string& text) {
  return parse_choice(option, text, kPoolingWords);
}

void PredictOptions::validate() const {
  TUPE_CHECK(!checkpoint.empty(), "--checkpoint: no checkpoint given (a step_XXXXXXXX folder or a checkpoint.dir)");
  TUPE_CHECK(top_k >= 1, "--top-k: must be >= 1, got " << top_k);
  TUPE_CHECK(batch_size >= 1, "--batch-size: must be >= 1, got " << batch_size);
  TUPE_CHECK(threads >= 0, "--threads: must be >= 0, got " << threads);
  TUPE_CHECK(mode != PredictMode::kEmbeddings || (!output.empty() && output != "-"),
             "--output: embeddings go to a .safetensors file (give --output FILE)");
  TUPE_CHECK(!output.empty(), "--output: empty (a file, or - for stdout)");
}

c10::Device pick_device(dist::DeviceRequest request) {
  if (request == dist::DeviceRequest::kCpu) return c10::Device(c10::kCPU);
  const bool cuda = torch::cuda::is_available();
  TUPE_CHECK(
      request != dist::DeviceRequest::kCuda || cuda,
      "--device cuda: no CUDA device visible to this process (or tupe was built without CUDA); use --device auto|cpu");
  return cuda ? c10::Device(c10::kCUDA, 0) : c10::Device(c10::kCPU);
}

namespace {

/// The tokenizer of the checkpoint (see tools/export/checkpoint_vocab.h).
std::unique_ptr<data_pipeline::Tokenizer> checkpoint_tokenizer(const PredictOptions& o,
                                                               const checkpoint::ModelCheckpoint& ckpt,
                                                               fs::path* vocab) {
  *vocab = exporting::pick_checkpoint_vocab(o.vocab, ckpt);
  TUPE_CHECK(!vocab->empty(), ckpt.dir.string() << ": no vocabulary: the checkpoint records none that is readable; give "
                                                   "--vocab (the vocab.txt or .model it was trained with)");
  exporting::check_checkpoint_vocab(*vocab, ckpt);
  data_pipeline::TokenizerOptions t;
  t.kind = exporting::tokenizer_kind_of(*vocab);
  t.vocab = vocab->string();
  const auto recorded = checkpoint::recorded_tokenizer(ckpt);
  if (recorded)
    TUPE_CHECK(recorded->kind == data_pipeline::to_string(t.kind),
               vocab->string() << ": a " << data_pipeline::to_string(t.kind) << " vocabulary, the checkpoint records tokenizer.kind "
                               << recorded->kind);
  if (t.kind == data_pipeline::TokenizerKind::kWordPiece || recorded) {
    t.lower_case = exporting::resolve_lower_case(o.lower_case, ckpt);
  } else if (o.lower_case != exporting::LowerCase::kAuto) {
    t.lower_case = o.lower_case == exporting::LowerCase::kTrue;
  }
  std::unique_ptr<data_pipeline::Tokenizer> tokenizer;
  if (t.kind == data_pipeline::TokenizerKind::kSentencePiece && o.lower_case == exporting::LowerCase::kAuto &&
      !recorded) {
    // SentencePiece keeps its case rule in the model: take the one it accepts.
    try {
      t.lower_case = true;
      tokenizer = data_pipeline::make_tokenizer(t);
    } catch (const Error&) {
      t.lower_case = false;
    }
  }
  if (!tokenizer) {
    t.validate();
    tokenizer = data_pipeline::make_tokenizer(t);
  }
  checkpoint::check_vocabulary(ckpt.vocab_sha256(), tokenizer->vocab_sha256(), ckpt.dir.string());
  return tokenizer;
}

/// The vocabulary entry of `id` ("##ing" for a WordPiece continuation, "▁the" for a
/// SentencePiece word start), "" outside the tokenizer's ids (a model vocab_size larger than
/// the vocabulary).
std::string token_text(const data_pipeline::Tokenizer& tokenizer, int64_t id) {
  if (id < 0 || id >= tokenizer.vocab_size()) return "";
  if (const auto* wp = dynamic_cast<const data_pipeline::WordPieceTokenizer*>(&tokenizer))
    return wp->id_to_token(static_cast<int32_t>(id));
  if (const auto* sp = dynamic_cast<const data_pipeline::SentencePieceTokenizer*>(&tokenizer))
    return sp->id_to_piece(static_cast<int32_t>(id));
  return tokenizer.decode({static_cast<int32_t>(id)});
}

/// Model inputs of some lines, padded to the longest: ids and mask (B, L) int64.
struct PredictBatch {
  at::Tensor ids, mask, segments;
  int64_t length = 0;
};

PredictBatch make_batch(const std::vector<InputLine>& lines, const std::vector<size_t>& rows, int32_t pad,
                        bool segments, const c10::Device& device) {
  PredictBatch b;
  for (size_t r : rows) b.length = std::max<int64_t>(b.length, static_cast<int64_t>(lines[r].ids.size()));
  const auto n = static_cast<int64_t>(rows.size());
  at::Tensor ids = at::full({n, b.length}, pad, at::kLong), mask = at::zeros({n, b.length}, at::kLong);
  auto* id_data = ids.data_ptr<int64_t>();
  auto* mask_data = mask.data_ptr<int64_t>();
  for (int64_t i = 0; i < n; ++i) {
    const auto& line = lines[rows[static_cast<size_t>(i)]].ids;
    for (size_t t = 0; t < line.size(); ++t) {
      id_data[i * b.length + static_cast<int64_t>(t)] = line[t];
      mask_data[i * b.length + static_cast<int64_t>(t)] = 1;
    }
  }
  b.ids = ids.to(device);
  b.mask = mask.to(device);
  if (segments) b.segments = at::zeros({n, b.length}, at::TensorOptions().dtype(at::kLong).device(device));
  return b;
}

/// Batches of line indices: longest lines first (tight padding); outputs are put back in
/// input order by the callers.
std::vector<std::vector<size_t>> batches(const std::vector<InputLine>& lines, int64_t batch_size) {
  std::vector<size_t> order(lines.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return lines[a].ids.size() > lines[b].ids.size(); });
  std::vector<std::vector<size_t>> out;
  for (size_t i = 0; i < order.size(); i += static_cast<size_t>(batch_size))
    out.emplace_back(order.begin() + static_cast<std::ptrdiff_t>(i),
                     order.begin() + static_cast<std::ptrdiff_t>(std::min(order.size(), i + static_cast<size_t>(batch_size))));
  return out;
}

/// Per line, per [MASK]: (token id, probability) pairs, best first.
using Ranked = std::vector<std::vector<std::vector<std::pair<int64_t, double>>>>;

Ranked fill_mask(model::TupeBertImpl& net, const std::vector<InputLine>& lines, const PredictOptions& o,
                 const c10::Device& device, int32_t pad, bool segments) {
  Ranked ranked(lines.size());
  const int64_t k = std::min<int64_t>(o.top_k, net.config.vocab_size);
  for (const auto& rows : batches(lines, o.batch_size)) {
    PredictBatch b = make_batch(lines, rows, pad, segments, device);
    std::vector<int64_t> flat;
    for (size_t i = 0; i < rows.size(); ++i)
      for (int64_t p : lines[rows[i]].mask_positions) flat.push_back(static_cast<int64_t>(i) * b.length + p);
    at::Tensor logits;
    {
      trainer::AutocastScope autocast(device.type(), autocast_dtype(o.precision));
      logits = net.mlm_logits(b.ids, b.mask, b.segments, at::tensor(flat, at::kLong).to(device));
    }
    const auto [values, indices] = logits.to(at::kFloat).softmax(-1).topk(k, -1);  // (M, k) each
    const at::Tensor v = values.to(at::kCPU).to(at::kDouble).contiguous(), ix = indices.to(at::kCPU).contiguous();
    const double* vp = v.data_ptr<double>();
    const int64_t* ip = ix.data_ptr<int64_t>();
    int64_t m = 0;
    for (size_t r : rows) {
      for (size_t j = 0; j < lines[r].mask_positions.size(); ++j, ++m) {
        std::vector<std::pair<int64_t, double>> top;
        for (int64_t c = 0; c < k; ++c) top.emplace_back(ip[m * k + c], vp[m * k + c]);
        ranked[r].push_back(std::move(top));
      }
    }
  }
  return ranked;
}

void write_fill_mask(std::ostream& os, const std::vector<InputLine>& lines, const Ranked& ranked,
                     const PredictOptions& o, const data_pipeline::Tokenizer& tokenizer) {
  if (o.format == FillMaskFormat::kTsv) os << "line\tmask\tposition\trank\ttoken_id\ttoken\tprobability\n";
  for (size_t i = 0; i < lines.size(); ++i) {
    const InputLine& line = lines[i];
    if (o.format == FillMaskFormat::kTsv) {
      for (size_t j = 0; j < ranked[i].size(); ++j)
        for (size_t c = 0; c < ranked[i][j].size(); ++c) {
          char prob[32];
          std::snprintf(prob, sizeof prob, "%.9g", ranked[i][j][c].second);
          os << line.line << '\t' << j + 1 << '\t' << line.mask_positions[j] << '\t' << c + 1 << '\t'
             << ranked[i][j][c].first << '\t' << token_text(tokenizer, ranked[i][j][c].first) << '\t' << prob << '\n';
        }
      continue;
    }
    nlohmann::json masks = nlohmann::json::array();
    for (size_t j = 0; j < ranked[i].size(); ++j) {
      nlohmann::json preds = nlohmann::json::array();
      for (const auto& [id, p] : ranked[i][j])
        preds.push_back({{"token_id", id}, {"token", token_text(tokenizer, id)}, {"probability", p}});
      masks.push_back({{"position", line.mask_positions[j]}, {"predictions", preds}});
    }
    const nlohmann::json record = {{"line", line.line}, {"text", line.text}, {"masks", masks}};
    os << record.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
  }
}

/// Writes `write`'s text to `path` under a temporary name, renamed on success.
template <class F>
void write_atomically(const fs::path& path, F&& write) {
  const fs::path tmp = path.string() + ".tmp-" + std::to_string(::getpid());
  try {
    std::ofstream os(tmp, std::ios::binary | std::ios::trunc);
    TUPE_CHECK(os, path.string() << ": cannot create " << tmp.filename().string());
    write(os);
    os.close();
    TUPE_CHECK(os, path.string() << ": write failed");
    std::error_code ec;
    fs::rename(tmp, path, ec);
    TUPE_CHECK(!ec, path.string() << ": cannot rename " << tmp.filename().string() << ": " << ec.message());
  } catch (...) {
    std::error_code ec;
    fs::remove(tmp, ec);
    throw;
  }
}

void embeddings(model::TupeBertImpl& net, const std::vector<InputLine>& lines, const PredictOptions& o,
                const c10::Device& device, int32_t pad, bool segments, int64_t max_tokens, const fs::path& ckpt_dir) {
  const auto n = static_cast<int64_t>(lines.size());
  const int64_t d = net.config.hidden_size;
  const bool tokens = o.pooling == Pooling::kTokens;
  at::Tensor out = tokens ? at::zeros({n, max_tokens, d}, at::kFloat) : at::zeros({n, d}, at::kFloat);
  for (const auto& rows : batches(lines, o.batch_size)) {
    PredictBatch b = make_batch(lines, rows, pad, segments, device);
    at::Tensor hidden;
    {
      trainer::AutocastScope autocast(device.type(), autocast_dtype(o.precision));
      hidden = net.encoder->forward(b.ids, b.mask, b.segments).hidden;  // (B, L_b, d)
    }
    hidden = hidden.to(at::kFloat).to(at::kCPU);
    const at::Tensor index = at::tensor(std::vector<int64_t>(rows.begin(), rows.end()), at::kLong);
    if (tokens) {
      hidden = hidden * b.mask.to(at::kCPU).unsqueeze(-1).to(at::kFloat);  // 0 at padding
      out.narrow(1, 0, b.length).index_copy_(0, index, hidden);
    } else {
      out.index_copy_(0, index, hidden.select(1, 0).contiguous());
    }
  }
  std::vector<size_t> all(lines.size());
  std::iota(all.begin(), all.end(), size_t{0});
  PredictBatch whole = make_batch(lines, all, pad, false, c10::Device(c10::kCPU));
  checkpoint::write_safetensors(
      o.output, {{"input_ids", whole.ids}, {"attention_mask", whole.mask}, {tokens ? "hidden" : "cls", out}},
      {{"format", "tupe-embeddings"}, {"pooling", to_string(o.pooling)}, {"checkpoint", ckpt_dir.string()}});
}

}  // namespace

PredictSummary run_predict(const PredictOptions& o, std::istream& in, std::ostream& out) {
  o.validate();
  if (o.threads > 0) at::set_num_threads(static_cast<int>(o.threads));
  const checkpoint::ModelCheckpoint ckpt = checkpoint::read_model_checkpoint(o.checkpoint);
  TUPE_CHECK(o.mode != PredictMode::kFillMask || ckpt.has_mlm_head,
             ckpt.dir.string() << ": no MLM head (mlm_head.*): a model fine-tuned by tupe finetune"
                               << (ckpt.task.empty() ? std::string() : " on " + ckpt.task)
                               << " keeps only its sentence head; fill-mask needs a checkpoint of tupe pretrain "
                                  "(--mode embeddings works on either)");
  PredictSummary summary;
  summary.checkpoint = ckpt.dir;
  const auto tokenizer = checkpoint_tokenizer(o, ckpt, &summary.vocab);
  TUPE_CHECK(tokenizer->vocab_size() <= ckpt.config.vocab_size,
             summary.vocab.string() << ": " << tokenizer->vocab_size() << " ids, more than the model's vocab_size "
                                    << ckpt.config.vocab_size);
  summary.device = pick_device(o.device);

  InputRules rules;
  rules.max_positions = ckpt.config.max_positions;
  rules.need_mask = o.mode == PredictMode::kFillMask;
  std::vector<InputLine> lines;
  if (o.input == "-") {
    rules.source = "<stdin>";
    lines = read_input_lines(in, *tokenizer, rules);
  } else {
    rules.source = o.input;
    std::ifstream file(o.input, std::ios::binary);
    TUPE_CHECK(file, o.input << ": cannot read the input file");
    lines = read_input_lines(file, *tokenizer, rules);
  }
  summary.lines = static_cast<int64_t>(lines.size());
  for (const auto& l : lines) {
    summary.masks += static_cast<int64_t>(l.mask_positions.size());
    summary.max_tokens = std::max<int64_t>(summary.max_tokens, static_cast<int64_t>(l.ids.size()));
  }

  model::TupeBert model = checkpoint::build_model(ckpt);
  model::TupeBertImpl& net = *model;
  net.to(summary.device);
  net.eval();
  c10::NoGradGuard no_grad;
  const int32_t pad = tokenizer->special_tokens().pad;
  const bool segments = ckpt.config.type_vocab_size > 0;
  if (o.mode == PredictMode::kEmbeddings) {
    embeddings(net, lines, o, summary.device, pad, segments, summary.max_tokens, ckpt.dir);
    return summary;
  }
  const Ranked ranked = fill_mask(net, lines, o, summary.device, pad, segments);
  if (o.output == "-") {
    write_fill_mask(out, lines, ranked, o, *tokenizer);
    out.flush();
    TUPE_CHECK(out, "<stdout>: write failed");
  } else {
    write_atomically(o.output, [&](std::ostream& os) { write_fill_mask(os, lines, ranked, o, *tokenizer); });
  }
  return summary;
}

}  // namespace tupe::predict
