// Hugging Face BERT import (checkpoint/hf_import.h) and the warm start (checkpoint/warm_start.h):
// the name map both ways, folders written here in every BERT layout read back exactly, every
// refusal of the list in one line, and each warm-start rule checked against an
// independent computation (the retrofit's positional term against BERT-A's layer-0 logits in
// float64, the extension's rows against the modulo rule, BERT-A -> BERT-R keeping the function).
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <fstream>

#include "checkpoint/hf_import.h"
#include "checkpoint/model_checkpoint.h"
#include "checkpoint/safetensors.h"
#include "checkpoint/warm_start.h"
#include "common/error.h"
#include "common/sha256.h"
#include "model/hf_names.h"
#include "tests/checkpoint/checkpoint_test_util.h"

namespace tupe::checkpoint {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

/// A small BERT-A with non-trivial weights (LayerNorms and biases moved off their init).
model::ModelOptions bert_options(int64_t max_positions = 16) {
  model::ModelOptions c;
  c.vocab_size = 40;
  c.hidden_size = 16;
  c.num_layers = 2;
  c.num_heads = 4;
  c.ffn_size = 24;
  c.max_positions = max_positions;
  c.type_vocab_size = 2;
  c.hidden_dropout = c.attention_dropout = 0.0;
  c.position_encoding = model::PositionEncoding::kBertAbsolute;
  c.untie_cls = false;
  return c;
}

model::TupeBert random_model(const model::ModelOptions& c, int64_t labels = 0, uint64_t seed = 7) {
  at::manual_seed(seed);
  model::TupeBert net(c, labels);
  torch::NoGradGuard no_grad;
  for (auto& p : net->parameters()) p.add_(at::randn_like(p) * 0.1);
  net->eval();
  return net;
}

NamedTensors named(model::TupeBertImpl& net) {
  NamedTensors out;
  for (const auto& item : net.named_parameters()) out.emplace_back(item.key(), item.value().detach().clone());
  return out;
}

enum class Layout { kMaskedLm, kBertModel };

/// Writes `net` as transformers would save it: config.json, model.safetensors under HF names
/// (BertForMaskedLM with the tied decoder stored, or BertModel without prefix and with a pooler
/// and the position_ids buffer), vocab.txt (vocab_lines entries) and tokenizer_config.json.
fs::path write_hf_folder(const fs::path& dir, model::TupeBertImpl& net, Layout layout, int64_t vocab_lines = -1) {
  fs::create_directories(dir);
  const model::ModelOptions& c = net.config;
  NamedTensors tensors;
  for (const auto& item : net.named_parameters()) {
    std::string hf = model::hf_bert_name(item.key());
    if (hf.empty()) continue;
    if (layout == Layout::kBertModel) {
      if (hf.rfind("cls.", 0) == 0 || hf.rfind("classifier.", 0) == 0) continue;
      hf = hf.substr(std::string("bert.").size());
    } else if (hf.rfind("bert.pooler.", 0) == 0 || hf.rfind("classifier.", 0) == 0) {
      continue;
    }
    tensors.emplace_back(hf, item.value().detach().contiguous());
  }
  if (layout == Layout::kMaskedLm) {
    tensors.emplace_back("cls.predictions.decoder.weight", net.encoder->embeddings->word->weight.detach().clone());
    tensors.emplace_back("cls.predictions.decoder.bias", net.mlm_head->bias.detach().clone());
  } else {
    tensors.emplace_back("embeddings.position_ids", at::arange(c.max_positions, at::kLong).unsqueeze(0));
  }
  write_safetensors(dir / "model.safetensors", tensors, {{"format", "pt"}});
  std::ofstream(dir / "config.json")
      << "{\"architectures\": [\"" << (layout == Layout::kMaskedLm ? "BertForMaskedLM" : "BertModel")
      << "\"], \"model_type\": \"bert\", \"vocab_size\": " << c.vocab_size << ", \"hidden_size\": " << c.hidden_size
      << ", \"num_hidden_layers\": " << c.num_layers << ", \"num_attention_heads\": " << c.num_heads
      << ", \"intermediate_size\": " << c.ffn_size << ", \"max_position_embeddings\": " << c.max_positions
      << ", \"type_vocab_size\": " << c.type_vocab_size
      << ", \"hidden_act\": \"gelu\", \"layer_norm_eps\": 1e-12, \"hidden_dropout_prob\": 0.0, "
         "\"attention_probs_dropout_prob\": 0.0, \"initializer_range\": 0.02, \"position_embedding_type\": "
         "\"absolute\"}\n";
  std::ofstream vocab(dir / "vocab.txt");
  for (int64_t i = 0; i < (vocab_lines < 0 ? c.vocab_size : vocab_lines); ++i) vocab << "tok" << i << "\n";
  std::ofstream(dir / "tokenizer_config.json") << "{\"do_lower_case\": false}\n";
  return dir;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(CheckpointHfNames, OneMapServesBothDirections) {
  model::TupeBert net = random_model(bert_options(), /*labels=*/3);
  for (const auto& item : net->named_parameters()) {
    const std::string hf = model::hf_bert_name(item.key());
    ASSERT_FALSE(hf.empty()) << item.key();
    EXPECT_EQ(model::tupe_name_from_hf_bert(hf), item.key()) << hf;
    if (hf.rfind("bert.", 0) == 0) {  // BertModel writes the same names without the prefix
      EXPECT_EQ(model::tupe_name_from_hf_bert(hf.substr(5)), item.key()) << hf;
    }
  }
  EXPECT_EQ(model::tupe_name_from_hf_bert("bert.encoder.layer.3.attention.output.LayerNorm.gamma"),
            "encoder.layers.3.attention_norm.weight");
  EXPECT_EQ(model::tupe_name_from_hf_bert("embeddings.LayerNorm.beta"), "encoder.embeddings.norm.bias");
  for (const char* none : {"cls.seq_relationship.weight", "cls.predictions.decoder.weight", "embeddings.position_ids",
                           "roberta.embeddings.word_embeddings.weight"})
    EXPECT_EQ(model::tupe_name_from_hf_bert(none), "") << none;
}

TEST(CheckpointHfImport, MaskedLmFolderReadsBackEveryTensorExactly) {
  TempDir tmp;
  model::TupeBert net = random_model(bert_options());
  const fs::path dir = write_hf_folder(tmp / "mlm", *net, Layout::kMaskedLm);
  const ModelCheckpoint ck = read_model_checkpoint(dir);
  EXPECT_TRUE(ck.from_hf());
  EXPECT_EQ(ck.hf_architecture, "BertForMaskedLM");
  EXPECT_TRUE(ck.has_mlm_head);
  EXPECT_TRUE(ck.pooler.empty());
  EXPECT_EQ(ck.step(), 0);
  EXPECT_EQ(ck.config.hidden_size, 16);
  EXPECT_EQ(ck.config.type_vocab_size, 2);
  EXPECT_EQ(ck.config.position_encoding, model::PositionEncoding::kBertAbsolute);
  ASSERT_TRUE(ck.contents.state.tokenizer);
  EXPECT_FALSE(ck.contents.state.tokenizer->lower_case);  // do_lower_case false in tokenizer_config.json
  EXPECT_EQ(ck.carried_vocab(), dir / "vocab.txt");
  std::ifstream v(dir / "vocab.txt", std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(v)), {});
  EXPECT_EQ(ck.vocab_sha256(), sha256_hex(bytes));
  const NamedTensors original = named(*net);
  ASSERT_EQ(ck.contents.model.size(), original.size());
  for (const auto& [name, t] : original) {
    const at::Tensor got = find_tensor(ck.contents.model, name);
    ASSERT_TRUE(got.defined()) << name;
    EXPECT_TRUE(testing::bitwise_equal(got, t)) << name;
  }
  // The model it builds is the model written.
  model::TupeBert rebuilt = build_model(ck);
  const at::Tensor ids = at::randint(0, 40, {2, 9}, at::kLong);
  const at::Tensor seg = at::cat({at::zeros({2, 4}, at::kLong), at::ones({2, 5}, at::kLong)}, 1);
  EXPECT_TRUE(testing::bitwise_equal(rebuilt->encoder->forward(ids, {}, seg).hidden,
                                     net->encoder->forward(ids, {}, seg).hidden));
}

TEST(CheckpointHfImport, BertModelFolderHasThePoolerApartAndNoHead) {
  TempDir tmp;
  model::TupeBert net = random_model(bert_options(), /*labels=*/2);
  const fs::path dir = write_hf_folder(tmp / "enc", *net, Layout::kBertModel);
  const ModelCheckpoint ck = read_model_checkpoint(dir);
  EXPECT_EQ(ck.hf_architecture, "BertModel");
  EXPECT_FALSE(ck.has_mlm_head);
  ASSERT_EQ(ck.pooler.size(), 2u);
  EXPECT_TRUE(testing::bitwise_equal(find_tensor(ck.pooler, "sentence_head.dense.weight"),
                                     net->sentence_head->dense->weight.detach()));
  for (const auto& [name, t] : ck.contents.model) EXPECT_EQ(name.rfind("encoder.", 0), 0u) << name;
  EXPECT_NE(error_of([&] { build_model(ck); }).find("without an MLM head"), std::string::npos);
}

TEST(CheckpointHfImport, TokenizerJsonAloneGivesTheVocabTxtBytes) {
  // transformers 5 saves a BERT tokenizer as tokenizer.json only: its WordPiece vocabulary, in
  // id order, is the vocab.txt it came from (same bytes, same SHA-256).
  TempDir tmp;
  model::TupeBert net = random_model(bert_options());
  const fs::path dir = write_hf_folder(tmp / "v5", *net, Layout::kMaskedLm);
  std::ifstream v(dir / "vocab.txt", std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(v)), {});
  fs::remove(dir / "vocab.txt");
  std::ofstream json(dir / "tokenizer.json");
  json << "{\"model\": {\"type\": \"WordPiece\", \"vocab\": {";
  for (int64_t i = 39; i >= 0; --i) json << "\"tok" << i << "\": " << i << (i ? ", " : "");  // not in id order
  json << "}}}";
  json.close();
  const ModelCheckpoint ck = read_model_checkpoint(dir);
  EXPECT_EQ(ck.vocab_sha256(), sha256_hex(bytes));
  std::ifstream stored(ck.carried_vocab(), std::ios::binary);
  EXPECT_EQ(std::string((std::istreambuf_iterator<char>(stored)), {}), bytes);
  std::ofstream(dir / "tokenizer.json") << "{\"model\": {\"type\": \"BPE\", \"vocab\": {}}}";
  EXPECT_NE(error_of([&] { read_model_checkpoint(dir); }).find("not a WordPiece tokenizer"), std::string::npos);
}

TEST(CheckpointHfImport, BadFoldersAreRefusedInOneLine) {
  TempDir tmp;
  model::TupeBert net = random_model(bert_options());
  const auto expect_error = [](const fs::path& dir, const std::vector<std::string>& parts) {
    const std::string e = error_of([&] { read_model_checkpoint(dir); });
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
    for (const auto& p : parts) EXPECT_NE(e.find(p), std::string::npos) << "'" << p << "' not in: " << e;
  };
  // Another model_type.
  fs::path d = write_hf_folder(tmp / "roberta", *net, Layout::kMaskedLm);
  std::ofstream(d / "config.json") << "{\"model_type\": \"roberta\", \"hidden_size\": 16}";
  expect_error(d, {"config.json", "model_type 'roberta' is not BERT"});
  // Weights without config.json.
  d = write_hf_folder(tmp / "noconfig", *net, Layout::kMaskedLm);
  fs::remove(d / "config.json");
  expect_error(d, {"no config.json"});
  // pytorch_model.bin only: the conversion command is in the line.
  d = write_hf_folder(tmp / "bin", *net, Layout::kMaskedLm);
  fs::rename(d / "model.safetensors", d / "pytorch_model.bin");
  expect_error(d, {"model.safetensors: missing", "pytorch_model.bin", "save_file(", "torch.load("});
  // A missing tensor, named as transformers names it.
  d = tmp / "missing";
  {
    write_hf_folder(d, *net, Layout::kMaskedLm);
    SafetensorsContents f = read_safetensors(d / "model.safetensors");
    NamedTensors kept;
    for (auto& [n, t] : f.tensors)
      if (n != "bert.encoder.layer.1.output.dense.weight") kept.emplace_back(n, t);
    write_safetensors(d / "model.safetensors", kept);
  }
  expect_error(d, {"model.safetensors", "missing", "bert.encoder.layer.1.output.dense.weight"});
  // A tensor of the wrong shape.
  d = tmp / "shape";
  {
    write_hf_folder(d, *net, Layout::kMaskedLm);
    SafetensorsContents f = read_safetensors(d / "model.safetensors");
    for (auto& [n, t] : f.tensors)
      if (n == "bert.encoder.layer.0.intermediate.dense.weight") t = at::zeros({25, 16});
    write_safetensors(d / "model.safetensors", f.tensors);
  }
  expect_error(d, {"bert.encoder.layer.0.intermediate.dense.weight", "[25, 16]", "[24, 16]"});
  // A vocabulary of another size than the embedding.
  d = write_hf_folder(tmp / "vocab", *net, Layout::kMaskedLm, /*vocab_lines=*/39);
  expect_error(d, {"vocab.txt", "39 entries", "40 rows"});
  // An untied decoder.
  d = tmp / "untied";
  {
    write_hf_folder(d, *net, Layout::kMaskedLm);
    SafetensorsContents f = read_safetensors(d / "model.safetensors");
    for (auto& [n, t] : f.tensors)
      if (n == "cls.predictions.decoder.weight") t = t + 1;
    write_safetensors(d / "model.safetensors", f.tensors);
  }
  expect_error(d, {"cls.predictions.decoder.weight differs from the word embedding"});
  // Not erf GELU.
  d = write_hf_folder(tmp / "act", *net, Layout::kMaskedLm);
  std::ofstream(d / "config.json") << "{\"model_type\": \"bert\", \"hidden_act\": \"gelu_new\"}";
  expect_error(d, {"hidden_act 'gelu_new'"});
}

TEST(CheckpointWarmStart, ContradictionsAreRefusedNamingKeyValuesAndSource) {
  TempDir tmp;
  model::TupeBert net = random_model(bert_options());
  const ModelCheckpoint src = read_model_checkpoint(write_hf_folder(tmp / "src", *net, Layout::kMaskedLm));
  model::ModelOptions run;  // the defaults: a TUPE-R of BERT-Base's sizes
  run.hidden_size = 128;
  std::string e = error_of([&] { plan_warm_start(src, run, {{"model.hidden_size", "tiny.ini"}}); });
  EXPECT_NE(e.find("model.hidden_size: 128 (tiny.ini) contradicts the source's 16 (the Hugging Face BertForMaskedLM"),
            std::string::npos)
      << e;
  // Keys the run did not set take the source's values, whatever their defaults are.
  const WarmStartPlan same = plan_warm_start(src, run, {});
  EXPECT_EQ(same.config.hidden_size, 16);
  EXPECT_EQ(same.config.position_encoding, model::PositionEncoding::kBertAbsolute);
  EXPECT_FALSE(same.retrofit || same.extended);
  EXPECT_EQ(same.config.hidden_dropout, 0.0);  // the source's (config.json: 0.0), not the default 0.1
  // Dropouts and init_std set by the run are the run's.
  run.hidden_dropout = 0.25;
  run.init_std = 0.05;
  const WarmStartPlan mine =
      plan_warm_start(src, run, {{"model.hidden_dropout", "a.ini"}, {"model.init_std", "the command line"}});
  EXPECT_EQ(mine.config.hidden_dropout, 0.25);
  EXPECT_EQ(mine.config.init_std, 0.05);
  EXPECT_EQ(mine.config.attention_dropout, 0.0);
  run.max_positions = 8;
  e = error_of([&] { plan_warm_start(src, run, {{"model.max_positions", "the command line"}}); });
  EXPECT_NE(e.find("model.max_positions: 8 (the command line) contradicts the source's 16"), std::string::npos) << e;
  EXPECT_NE(e.find("not shorten"), std::string::npos) << e;
  run.position_encoding = model::PositionEncoding::kBertAbsoluteUntied;
  e = error_of([&] { plan_warm_start(src, run, {{"model.position_encoding", "x.ini"}}); });
  EXPECT_NE(e.find("model.position_encoding: bert-absolute-untied (x.ini)"), std::string::npos) << e;
}

TEST(CheckpointWarmStart, ExtendedRowsCopyTrainedPositionsModuloTheirLength) {
  const at::Tensor trained = at::randn({7, 3}, at::kDouble);
  for (int64_t first : {0, 1}) {
    const at::Tensor grown = extend_position_rows(trained, 20, first);
    ASSERT_EQ(grown.size(0), 20);
    const int64_t positions = 7 - first;
    for (int64_t r = 0; r < 20; ++r) {
      const int64_t expected = r < first ? r : first + (r - first) % positions;
      EXPECT_TRUE(at::equal(grown[r], trained[expected])) << "first " << first << " row " << r;
    }
  }
  EXPECT_NE(error_of([&] { extend_position_rows(trained, 6, 0); }).find("6 rows asked of a table of 7"),
            std::string::npos);
}

TEST(CheckpointWarmStart, LongerBertAKeepsItsOutputsOnTrainedLengths) {
  TempDir tmp;
  model::TupeBert net = random_model(bert_options(16));
  const ModelCheckpoint src = read_model_checkpoint(write_hf_folder(tmp / "src", *net, Layout::kMaskedLm));
  model::ModelOptions run;
  run.max_positions = 40;
  const WarmStartPlan plan = plan_warm_start(src, run, {{"model.max_positions", "the command line"}});
  ASSERT_TRUE(plan.extended);
  model::TupeBert longer(plan.config);
  load_warm_start(*longer, src, plan);
  longer->eval();
  const at::Tensor table = longer->encoder->embeddings->position->weight.detach();
  for (int64_t t = 0; t < 40; ++t)
    EXPECT_TRUE(at::equal(table[t], net->encoder->embeddings->position->weight.detach()[t % 16])) << t;
  const at::Tensor ids = at::randint(0, 40, {2, 16}, at::kLong);
  EXPECT_TRUE(testing::bitwise_equal(longer->encoder->forward(ids).hidden, net->encoder->forward(ids).hidden));
  EXPECT_EQ(longer->encoder->forward(at::randint(0, 40, {1, 40}, at::kLong)).hidden.size(1), 40);
}

TEST(CheckpointWarmStart, BertAContinuedAsBertRKeepsTheFunction) {
  TempDir tmp;
  model::TupeBert net = random_model(bert_options());
  const ModelCheckpoint src = read_model_checkpoint(write_hf_folder(tmp / "src", *net, Layout::kMaskedLm));
  model::ModelOptions run;
  run.position_encoding = model::PositionEncoding::kBertRelative;
  const WarmStartPlan plan = plan_warm_start(src, run, {{"model.position_encoding", "the command line"}});
  ASSERT_TRUE(plan.retrofit);
  EXPECT_FALSE(plan.config.untie_cls);
  model::TupeBert bert_r(plan.config);
  load_warm_start(*bert_r, src, plan);
  bert_r->eval();
  EXPECT_EQ(bert_r->encoder->positional->relative_bias->weight.abs().max().item<double>(), 0.0);
  const at::Tensor ids = at::randint(0, 40, {2, 12}, at::kLong);
  const at::Tensor mask = at::ones({2, 12}, at::kLong).index_put_({1, at::indexing::Slice(8)}, 0);
  const double diff = (bert_r->encoder->forward(ids, mask).hidden - net->encoder->forward(ids, mask).hidden)
                          .abs().max().item<double>();
  EXPECT_LT(diff, 1e-6);
}

/// LN over the last dim with weight and bias, in float64.
at::Tensor layer_norm64(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) {
  const at::Tensor mean = x.mean(-1, true);
  const at::Tensor var = (x - mean).pow(2).mean(-1, true);
  return (x - mean) / (var + 1e-12).sqrt() * w + b;
}

TEST(CheckpointWarmStart, RetrofitTupeRStartsFromBertsLayerZeroTerms) {
  TempDir tmp;
  model::TupeBert net = random_model(bert_options());
  net->to(at::kDouble);
  const ModelCheckpoint src = read_model_checkpoint(write_hf_folder(tmp / "src", *net, Layout::kMaskedLm));
  model::ModelOptions run;  // untie_cls left to the variant's default (on for TUPE)
  run.position_encoding = model::PositionEncoding::kTupeRelative;
  const WarmStartPlan plan = plan_warm_start(src, run, {{"model.position_encoding", "the command line"}});
  ASSERT_TRUE(plan.retrofit);
  ASSERT_TRUE(plan.config.untie_cls);
  model::TupeBert tupe(plan.config);
  tupe->to(at::kDouble);
  load_warm_start(*tupe, src, plan);
  tupe->eval();
  torch::NoGradGuard no_grad;
  const int64_t L = 10, H = 4, dh = 4;
  // BERT-A's layer-0 logits of the positions alone, from the source's own tensors.
  model::Encoder s = net->encoder;
  const at::Tensor p = layer_norm64(s->embeddings->position->weight.narrow(0, 0, L), s->embeddings->norm->weight,
                                    s->embeddings->norm->bias);
  const auto& a0 = s->layers[0]->as<model::EncoderLayerImpl>()->attention;
  const at::Tensor q = at::linear(p, a0->query->weight, a0->query->bias).view({L, H, dh}).transpose(0, 1);
  const at::Tensor k = at::linear(p, a0->key->weight, a0->key->bias).view({L, H, dh}).transpose(0, 1);
  const at::Tensor bert_positions = at::matmul(q, k.transpose(1, 2)) / std::sqrt(static_cast<double>(dh));
  const at::Tensor P = tupe->encoder->positional->forward(L);  // (H, L, L); the relative bias is 0
  // Positions 1.. of TUPE are BERT's positions 1..; [CLS]'s row and column are reset (Eq. 9).
  const double diff = (P.narrow(1, 1, L - 1).narrow(2, 1, L - 1) -
                       bert_positions.narrow(1, 1, L - 1).narrow(2, 1, L - 1)).abs().max().item<double>();
  EXPECT_LT(diff, 1e-12);
  // theta_1 = the [CLS] position's own term; theta_2 likewise (row 1 = BERT's row 0).
  for (int64_t h = 0; h < H; ++h) {
    EXPECT_NEAR(P[h][0][3].item<double>(), bert_positions[h][0][0].item<double>(), 1e-12);
    EXPECT_NEAR(P[h][5][0].item<double>(), bert_positions[h][0][0].item<double>(), 1e-12);
  }
  // The word term of every layer at TUPE's scale equals BERT's at its own.
  const at::Tensor x = at::randn({1, L, 16}, at::kDouble);
  for (int64_t i = 0; i < 2; ++i) {
    const auto& sa = s->layers[i]->as<model::EncoderLayerImpl>()->attention;
    const at::Tensor qi = at::linear(x, sa->query->weight, sa->query->bias).view({1, L, H, dh}).transpose(1, 2);
    const at::Tensor ki = at::linear(x, sa->key->weight, sa->key->bias).view({1, L, H, dh}).transpose(1, 2);
    const at::Tensor bert_logits = at::matmul(qi, ki.transpose(-2, -1)) / std::sqrt(static_cast<double>(dh));
    const at::Tensor tupe_logits = tupe->encoder->layers[i]->as<model::EncoderLayerImpl>()->attention->logits(x, at::Tensor());
    EXPECT_LT((tupe_logits - bert_logits).abs().max().item<double>(), 1e-12) << "layer " << i;
  }
  EXPECT_EQ(tupe->encoder->positional->relative_bias->weight.abs().max().item<double>(), 0.0);
}

TEST(CheckpointWarmStart, TupeSourceGrowsItsTableAroundTheClsRow) {
  TempDir tmp;
  model::ModelOptions c = bert_options(12);
  c.position_encoding = model::PositionEncoding::kTupeRelative;
  c.untie_cls = true;
  model::TupeBert net = random_model(c);
  // A tupe source: the store writes what pre-training writes; here the ModelCheckpoint is filled directly.
  ModelCheckpoint src;
  src.dir = tmp.path();
  src.config = c;
  src.has_mlm_head = true;
  src.contents.model = named(*net);
  model::ModelOptions run;
  run.max_positions = 30;
  const WarmStartPlan plan = plan_warm_start(src, run, {{"model.max_positions", "the command line"}});
  model::TupeBert longer(plan.config);
  load_warm_start(*longer, src, plan);
  const at::Tensor got = longer->encoder->positional->table->weight.detach();
  const at::Tensor trained = net->encoder->positional->table->weight.detach();
  ASSERT_EQ(got.size(0), 31);
  EXPECT_TRUE(at::equal(got[0], trained[0]));  // theta_1's row
  for (int64_t t = 0; t < 30; ++t) EXPECT_TRUE(at::equal(got[t + 1], trained[1 + t % 12])) << "position " << t;
  EXPECT_TRUE(at::equal(longer->encoder->positional->relative_bias->weight, net->encoder->positional->relative_bias->weight));
  // The source's buckets are its own: another count is refused.
  run.relative_buckets = 64;
  EXPECT_NE(error_of([&] {
              plan_warm_start(src, run, {{"model.relative_buckets", "the command line"}});
            }).find("model.relative_buckets: 64 (the command line) contradicts the source's 32"),
            std::string::npos);
}

}  // namespace
}  // namespace tupe::checkpoint
