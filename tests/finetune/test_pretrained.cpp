// The one checkpoint loader (checkpoint/model_checkpoint.h) as fine-tuning and evaluation use
// it: the config comes from the checkpoint, the encoder tensors are copied exactly, mlm_head.*
// is dropped; a renamed,
// missing, extra or mis-shaped tensor, another positional variant, another vocabulary or a
// config without the model keys is ONE error naming everything that is wrong.
#include <gtest/gtest.h>

#include "checkpoint/durable_io.h"
#include "checkpoint/model_checkpoint.h"
#include "common/sha256.h"
#include "tests/finetune/checkpoint_fixture.h"
#include "tests/finetune/glue_test_util.h"
#include "trainer/finetune/model_tokenizer.h"
#include "trainer/finetune/saved_model.h"

namespace tupe::finetune {
namespace {

using checkpoint::check_vocabulary;
using checkpoint::load_encoder;
using checkpoint::read_model_checkpoint;
using testing::error_of;
using testing::ScratchDir;
using testing::tiny_config;
using testing::write_pretraining_checkpoint;

const std::string kSha = "5f7b1fa0b8a2b4b4e4e4e7c1d5b0f2e6a3c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5";

at::Tensor param(model::TupeBertImpl& m, const std::string& name) {
  for (const auto& item : m.named_parameters())
    if (item.key() == name) return item.value();
  throw std::runtime_error("no parameter " + name);
}

TEST(GluePretrained, LoadsConfigAndEncoderExactly) {
  ScratchDir dir;
  model::ModelOptions config = tiny_config();
  config.position_encoding = model::PositionEncoding::kTupeAbsolute;
  config.type_vocab_size = 2;
  const auto step_dir = write_pretraining_checkpoint(dir.path(), config, kSha, /*seed=*/5, /*step=*/300);
  // The store folder resolves to its newest whole checkpoint.
  const checkpoint::ModelCheckpoint enc = read_model_checkpoint(dir.path());
  EXPECT_EQ(enc.dir, step_dir);
  EXPECT_EQ(enc.step(), 300);
  EXPECT_EQ(enc.vocab_sha256(), kSha);
  EXPECT_EQ(model::ModelOptions::fields().to_kv(enc.config), model::ModelOptions::fields().to_kv(config));
  EXPECT_TRUE(enc.has_mlm_head);
  EXPECT_FALSE(enc.fine_tuned());
  int64_t encoder_tensors = 0;  // what load_encoder takes: every tensor but mlm_head.*
  for (const auto& [name, t] : enc.contents.model) encoder_tensors += name.rfind("mlm_head.", 0) == 0 ? 0 : 1;

  // Into a classifier: every encoder tensor equals the saved one; the head is fresh.
  at::manual_seed(5);
  model::TupeBert reference(config);  // the same init as the checkpoint's
  model::TupeBert net(enc.config, 3);
  load_encoder(*net, enc.contents.model, "ckpt");
  int64_t compared = 0;
  for (const auto& item : reference->named_parameters()) {
    if (item.key().rfind("encoder.", 0) != 0) continue;
    EXPECT_TRUE(at::equal(param(*net, item.key()), item.value())) << item.key();
    ++compared;
  }
  EXPECT_EQ(compared, encoder_tensors);
  EXPECT_EQ(param(*net, "sentence_head.out.weight").size(0), 3);
  const auto trained = finetuned_parameters(*net);
  for (const auto& [name, t] : trained) EXPECT_NE(name.rfind("mlm_head.", 0), 0u) << name;
  EXPECT_NE(checkpoint::find_tensor(trained, "sentence_head.dense.weight").defined(), false);
}

TEST(GluePretrained, RenamedTensorIsRefusedByName) {
  ScratchDir dir;
  write_pretraining_checkpoint(dir.path(), tiny_config(), kSha, 1, 100, [](checkpoint::CheckpointContents& c) {
    for (auto& [name, t] : c.model)
      if (name == "encoder.layers.1.ffn_in.weight") name = "encoder.layers.1.ffn_input.weight";
  });
  const checkpoint::ModelCheckpoint enc = read_model_checkpoint(dir.path());
  model::TupeBert net(enc.config, 2);
  const std::string err = error_of([&] { load_encoder(*net, enc.contents.model, "ckpt/model.safetensors"); });
  EXPECT_NE(err.find("ckpt/model.safetensors: 2 tensor name/shape/dtype mismatch(es)"), std::string::npos) << err;
  EXPECT_NE(err.find("missing: encoder.layers.1.ffn_in.weight"), std::string::npos) << err;
  EXPECT_NE(err.find("unexpected: encoder.layers.1.ffn_input.weight"), std::string::npos) << err;
}

TEST(GluePretrained, OtherVariantMisShapedAndExtraTensorsAreListed) {
  ScratchDir dir;
  // BERT-A tensors under a config that claims TUPE-R: the positional term is missing and the
  // absolute position table is unexpected.
  model::ModelOptions bert_a = tiny_config();
  bert_a.position_encoding = model::PositionEncoding::kBertAbsolute;
  bert_a.untie_cls = false;
  write_pretraining_checkpoint(dir.path(), bert_a, kSha, 1, 100, [](checkpoint::CheckpointContents& c) {
    for (const auto& [k, v] : model::ModelOptions::fields().to_kv(tiny_config())) c.state.config["model." + k] = v;
  });
  checkpoint::ModelCheckpoint enc = read_model_checkpoint(dir.path());
  EXPECT_EQ(enc.config.position_encoding, model::PositionEncoding::kTupeRelative);
  model::TupeBert net(enc.config, 2);
  std::string err = error_of([&] { load_encoder(*net, enc.contents.model, "ckpt"); });
  for (const char* name : {"missing: encoder.positional.table.weight", "missing: encoder.positional.query.weight",
                           "missing: encoder.positional.key.weight", "missing: encoder.positional.relative_bias.weight",
                           "unexpected: encoder.embeddings.position.weight"})
    EXPECT_NE(err.find(name), std::string::npos) << name << " in: " << err;

  // A mis-shaped tensor and a fine-tuned model's head (not a pre-training checkpoint).
  ScratchDir dir2;
  write_pretraining_checkpoint(dir2.path(), tiny_config(), kSha, 1, 100, [](checkpoint::CheckpointContents& c) {
    for (auto& [name, t] : c.model)
      if (name == "encoder.layers.0.attention.query.bias") t = at::zeros({31});
    c.model.emplace_back("sentence_head.out.bias", at::zeros({2}));
  });
  enc = read_model_checkpoint(dir2.path());
  model::TupeBert net2(enc.config, 2);
  err = error_of([&] { load_encoder(*net2, enc.contents.model, "ckpt"); });
  EXPECT_NE(err.find("2 tensor name/shape/dtype mismatch(es)"), std::string::npos) << err;
  EXPECT_NE(err.find("shape of encoder.layers.0.attention.query.bias: saved [31] vs current [32]"), std::string::npos)
      << err;
  EXPECT_NE(err.find("unexpected: sentence_head.out.bias"), std::string::npos) << err;
}

TEST(GluePretrained, VocabularyAndConfigChecks) {
  const auto tok = testing::uncased_tokenizer();
  EXPECT_NO_THROW(check_vocabulary(tok->vocab_sha256(), tok->vocab_sha256(), "ckpt"));
  const std::string err = error_of([&] { check_vocabulary(kSha, tok->vocab_sha256(), "ckpt"); });
  EXPECT_NE(err.find("ckpt: the checkpoint was trained with vocabulary sha256 " + kSha), std::string::npos) << err;
  EXPECT_NE(err.find(tok->vocab_sha256()), std::string::npos) << err;

  KeyValues saved;
  for (const auto& [k, v] : model::ModelOptions::fields().to_kv(tiny_config())) saved["model." + k] = v;
  saved.erase("model.num_heads");
  saved.erase("model.position_encoding");
  EXPECT_EQ(error_of([&] { model::model_config_from_saved(saved, "state.json"); }),
            "state.json: the saved config lacks 2 model key(s): model.num_heads, model.position_encoding");
  saved["model.num_heads"] = "4";
  saved["model.position_encoding"] = "tupe-r";
  EXPECT_NE(error_of([&] { model::model_config_from_saved(saved, "state.json"); }).find("position_encoding"),
            std::string::npos);
  ScratchDir empty;
  EXPECT_NE(error_of([&] { read_model_checkpoint(empty.path()); }).find("holds no whole checkpoint"), std::string::npos);
}

TEST(GluePretrained, ACheckpointWithoutVocabularyAsksForOneByName) {
  // No tokenizer.vocab given, and the checkpoint carries none and records none: the message
  // that says so (and what to give) is the one the job reaches -- no earlier, generic check
  // of an empty tokenizer.vocab stands in front of it.
  ScratchDir dir;
  const auto step = write_pretraining_checkpoint(dir.path(), tiny_config(), kSha);
  const checkpoint::ModelCheckpoint ckpt = read_model_checkpoint(step.string());
  data_pipeline::TokenizerOptions none;
  ASSERT_TRUE(none.vocab.empty());
  const std::string err = error_of([&] { checkpoint_tokenizer_options(none, {}, ckpt, false); });
  EXPECT_EQ(err.rfind("tokenizer.vocab: " + ckpt.dir.string() +
                          " carries no vocabulary and records none that is "
                          "readable; give --tokenizer.vocab",
                      0),
            0u)
      << err;
}

TEST(GluePretrained, FinetunedModelRoundTrip) {
  ScratchDir dir;
  model::TupeBert net(tiny_config(), 1);
  const auto weights = finetuned_parameters(*net);
  KeyValues config;
  for (const auto& [k, v] : model::ModelOptions::fields().to_kv(tiny_config())) config["model." + k] = v;
  config["glue.task"] = "STS-B";
  config["glue.max_length"] = "96";
  // The model carries its vocabulary: a cased one, recorded as such.
  const std::string vocab_text = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nThe\nthe\n";
  checkpoint::write_file_atomic(dir.path() / "vocab.txt", vocab_text);
  const std::string vocab_sha = sha256_hex(vocab_text);
  EXPECT_NE(error_of([&] {
              save_finetuned_model(dir.path() / "models/STS-B", 42, weights, config, kSha,
                                   checkpoint::TokenizerRecord{"wordpiece", false, ""}, dir.path() / "vocab.txt");
            }).find("differs from vocab_sha256 " + kSha),
            std::string::npos);
  const auto path = save_finetuned_model(dir.path() / "models/STS-B", 42, weights, config, vocab_sha,
                                         checkpoint::TokenizerRecord{"wordpiece", false, ""}, dir.path() / "vocab.txt");
  EXPECT_EQ(path, dir.path() / "models/STS-B/step_00000042");
  const checkpoint::ModelCheckpoint loaded = read_model_checkpoint(dir.path() / "models/STS-B");
  ASSERT_TRUE(loaded.contents.state.tokenizer.has_value());
  EXPECT_EQ(loaded.contents.state.tokenizer->kind, "wordpiece");
  EXPECT_FALSE(loaded.contents.state.tokenizer->lower_case);
  EXPECT_EQ(loaded.carried_vocab(), path / "vocab.txt");
  EXPECT_EQ(checkpoint::read_file_bytes(loaded.carried_vocab()), vocab_text);
  EXPECT_EQ(loaded.contents.state.format_version, 2);
  EXPECT_NO_THROW(checkpoint::require_fine_tuned(loaded));
  EXPECT_TRUE(loaded.fine_tuned());
  EXPECT_EQ(loaded.task, "STS-B");
  EXPECT_EQ(loaded.max_length, 96);
  EXPECT_EQ(loaded.num_labels, 1);
  EXPECT_EQ(loaded.vocab_sha256(), vocab_sha);
  model::TupeBert again(loaded.config, 1);
  checkpoint::copy_named_tensors(finetuned_parameters(*again), loaded.contents.model, "model");
  for (const auto& [name, t] : weights) EXPECT_TRUE(at::equal(param(*again, name), t)) << name;
  // The loader's own model: the same weights, in eval mode.
  model::TupeBert built = checkpoint::build_model(loaded);
  EXPECT_FALSE(built->is_training());
  for (const auto& [name, t] : weights) EXPECT_TRUE(at::equal(param(*built, name), t)) << name;
  // A pre-training checkpoint is not a fine-tuned model.
  ScratchDir pre;
  write_pretraining_checkpoint(pre.path(), tiny_config(), kSha);
  EXPECT_NE(error_of([&] { checkpoint::require_fine_tuned(read_model_checkpoint(pre.path())); })
                .find("key 'config.glue.task' missing"),
            std::string::npos);
}

}  // namespace
}  // namespace tupe::finetune
