// trajectory_fixture: tupe's side of the trajectory-parity test (trajectory_checks.py).
//   trajectory_fixture SHARDS OUT [key=value ...]
// Builds a tiny BERT-A (tupe's initialiser, seeded by `seed`) and runs `steps` optimizer
// steps (AdamW, warm-up + linear decay, weight decay by trainer::default_weight_decay,
// clipping) on batches of tupe's own loader (data_pipeline::Loader, dynamic 80/10/10
// masking) over the shards in SHARDS. Writes:
//   OUT/step0.safetensors   the initial weights under Hugging Face BertForMaskedLM names
//                           (model/hf_names.h), F64, plus BERT's one all-zero token-type row
//   OUT/final.safetensors   the weights after the last step, the same way
//   OUT/batches.safetensors per step t (1-based): "<t>/input_ids", "<t>/attention_mask"
//                           (b, L) I64, "<t>/masked_positions" (M) I64 flat indices into b*L,
//                           "<t>/masked_labels" (M) I64 original ids: all the loss depends on
//   OUT/trajectory.json     {"config": {...}, "decay": {hf name: bool}, "steps": [{"step",
//                           "loss" (mean over the step's masked tokens), "masked", "lr",
//                           "grad_norm" (pre-clip), "clipped"}]}
// Keys (defaults): precision=fp64 steps=300 batch=8 hidden=32 layers=2 heads=4 ffn=128
// lr=1e-3 warmup=30 total=300 weight_decay=0.01 clip=1.0 eps=1e-6 beta1=0.9 beta2=0.999
// seed=1 data_seed=1234 type_vocab=0. type_vocab > 0 gives the model a segment table (row 0
// added to every token, trained, as BertForMaskedLM's token-type table); 0 writes BERT's one
// all-zero token-type row instead. Single process: MPI is initialised as a singleton.
//
// Both precisions run the job's own step, pretrain::run_mlm_step on trainer::TrainStep, as
// `tupe pretrain --precision.precision fp32` runs it; precision=fp64 casts the model to float64
// first (TrainStep keeps the gradients' dtype: the flat buffer, the norm and the clip factor,
// and the MLM loss sums float64 logits in float64).
#include <ATen/ATen.h>
#include <mpi.h>

#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "checkpoint/safetensors.h"
#include "common/error.h"
#include "data_pipeline/loader.h"
#include "dist/mpi_communicator.h"
#include "dist/mpi_env.h"
#include "model/hf_names.h"
#include "model/tupe_bert.h"
#include "trainer/pretrain/batch_plan.h"
#include "trainer/pretrain/step.h"
#include "trainer/train_step.h"

namespace {

using namespace tupe;

/// The fixture's settings: key=value arguments over the defaults of the file comment.
struct Settings {
  std::map<std::string, std::string> kv = {
      {"precision", "fp64"}, {"steps", "300"},   {"batch", "8"},        {"hidden", "32"},        {"layers", "2"},   {"heads", "4"},
      {"ffn", "128"},     {"lr", "1e-3"},        {"warmup", "30"},        {"total", "300"},  {"weight_decay", "0.01"},
      {"clip", "1.0"},    {"eps", "1e-6"},       {"beta1", "0.9"},        {"beta2", "0.999"}, {"seed", "1"},
      {"data_seed", "1234"}, {"type_vocab", "0"}};
  int64_t i(const std::string& k) const { return std::stoll(kv.at(k)); }
  double d(const std::string& k) const { return std::stod(kv.at(k)); }
};

Settings parse_settings(int argc, char** argv) {
  Settings s;
  for (int a = 3; a < argc; ++a) {
    const std::string arg = argv[a];
    const auto eq = arg.find('=');
    TUPE_CHECK(eq != std::string::npos && s.kv.count(arg.substr(0, eq)),
               "argument '" << arg << "': expected key=value with a key of the file comment");
    s.kv[arg.substr(0, eq)] = arg.substr(eq + 1);
  }
  return s;
}

/// `net`'s parameters under HF BertForMaskedLM names, float64; BERT's zero token-type row when
/// the model has no segment table.
checkpoint::NamedTensors hf_tensors(model::TupeBertImpl& net) {
  checkpoint::NamedTensors out;
  for (const auto& item : net.named_parameters()) {
    const std::string hf = model::hf_bert_name(item.key());
    TUPE_CHECK(!hf.empty(), "tensor '" << item.key() << "' has no place in BertForMaskedLM");
    out.emplace_back(hf, item.value().detach().to(at::kDouble).contiguous().clone());
  }
  if (net.config.type_vocab_size == 0)
    out.emplace_back("bert.embeddings.token_type_embeddings.weight", at::zeros({1, net.config.hidden_size}, at::kDouble));
  return out;
}

int run(int argc, char** argv) {
  TUPE_CHECK(argc >= 3, "usage: trajectory_fixture SHARDS OUT [key=value ...]");
  const std::string shards = argv[1];
  const std::filesystem::path out = argv[2];
  const Settings s = parse_settings(argc, argv);

  dist::MpiEnv env(&argc, &argv);
  TUPE_CHECK(env.world_size() == 1, "trajectory_fixture runs as one process, not " << env.world_size() << " ranks");
  dist::DistOptions dist_options;
  dist_options.backend = dist::BackendKind::kMpi;
  dist_options.timeout_s = 0;
  dist::MpiCommunicator comm(env, dist_options, /*watchdog=*/nullptr);

  data_pipeline::DataOptions data;
  data.train_shards = shards;
  data.global_batch_size = s.i("batch");
  data.seed = s.i("data_seed");
  data.num_threads = 1;
  data.pin_memory = data_pipeline::PinMemory::kOff;
  data.validate();
  const auto dataset = data_pipeline::open_pretrain_dataset({shards}, data.dataset_options("train", ""));

  model::ModelOptions mc;
  mc.vocab_size = dataset->info().vocab_size;
  mc.hidden_size = s.i("hidden");
  mc.num_layers = s.i("layers");
  mc.num_heads = s.i("heads");
  mc.ffn_size = s.i("ffn");
  mc.max_positions = dataset->info().max_seq_len;
  mc.type_vocab_size = s.i("type_vocab");
  mc.hidden_dropout = 0;
  mc.attention_dropout = 0;
  mc.position_encoding = model::PositionEncoding::kBertAbsolute;
  mc.untie_cls = false;
  mc.layer_norm = model::LayerNormPlacement::kPost;
  mc.validate();
  TUPE_CHECK(model::hf_bert_refusal(mc).empty(), model::hf_bert_refusal(mc));

  const std::string precision = s.kv.at("precision");
  TUPE_CHECK(precision == "fp64" || precision == "fp32", "precision '" << precision << "': expected fp64 or fp32");
  const bool fp64 = precision == "fp64";
  at::manual_seed(static_cast<uint64_t>(s.i("seed")));  // as the pre-training job does
  model::TupeBert net(mc);
  if (fp64) net->to(at::kDouble);
  net->train();
  std::filesystem::create_directories(out);  // after the inputs were checked
  checkpoint::write_safetensors(out / "step0.safetensors", hf_tensors(*net));

  trainer::TrainStepOptions so;
  so.optimizer.optimizer = trainer::OptimizerKind::kAdamW;
  so.optimizer.lr = s.d("lr");
  so.optimizer.beta1 = s.d("beta1");
  so.optimizer.beta2 = s.d("beta2");
  so.optimizer.eps = s.d("eps");
  so.optimizer.weight_decay = s.d("weight_decay");
  so.optimizer.warmup_steps = s.i("warmup");
  so.optimizer.total_steps = s.i("total");
  so.optimizer.schedule = trainer::ScheduleKind::kLinear;
  so.optimizer.clip_grad_norm = s.d("clip");
  so.optimizer.validate();
  so.precision.precision = trainer::Precision::kFp32;  // no autocast, no loss scaling
  so.dist = dist_options;
  so.seed = s.i("seed");
  checkpoint::NamedTensors params;
  for (auto& item : net->named_parameters()) {
    params.emplace_back(item.key(), item.value());
  }
  trainer::TrainStep step(params, comm, c10::Device(c10::kCPU), so);
  const trainer::Optimizer& opt = step.optimizer();
  nlohmann::json decay = nlohmann::json::object();
  for (const auto& [name, t] : params) decay[model::hf_bert_name(name)] = opt.decays(name);

  data_pipeline::Loader loader(dataset, data, /*rank=*/0, /*world_size=*/1);
  const pretrain::BatchPlan plan{data.global_batch_size, data.global_batch_size, 1};
  const double max_norm = so.optimizer.clip_grad_norm;
  checkpoint::NamedTensors batches;
  nlohmann::json steps = nlohmann::json::array();
  const int64_t n_steps = s.i("steps");
  for (int64_t t = 1; t <= n_steps; ++t) {
    const data_pipeline::MlmBatch b = loader.next();
    const double count = static_cast<double>(b.global_masked_count);
    const trainer::StepResult r = pretrain::run_mlm_step(step, *net, b, plan, at::kFloat);
    TUPE_CHECK(r.found_inf.item<float>() == 0.0f, "step " << t << ": non-finite gradients");
    const double loss_sum = r.loss_sum.item<double>();
    const double grad_norm = r.grad_norm.item<double>();
    const double lr = r.lr;
    const std::string p = std::to_string(t) + "/";
    batches.emplace_back(p + "input_ids", b.input_ids);
    batches.emplace_back(p + "attention_mask", b.attention_mask);
    batches.emplace_back(p + "masked_positions", b.masked_positions);
    batches.emplace_back(p + "masked_labels", b.masked_labels);
    steps.push_back({{"step", t},
                     {"loss", loss_sum / count},
                     {"masked", b.global_masked_count},
                     {"lr", lr},
                     {"grad_norm", grad_norm},
                     {"clipped", max_norm > 0 && grad_norm > max_norm}});
  }
  checkpoint::write_safetensors(out / "batches.safetensors", batches);
  checkpoint::write_safetensors(out / "final.safetensors", hf_tensors(*net));

  nlohmann::json config = nlohmann::json::object();
  for (const auto& [k, v] : s.kv) config[k] = v;
  config["vocab_size"] = mc.vocab_size;
  config["max_positions"] = mc.max_positions;
  config["layer_norm_eps"] = mc.layer_norm_eps;
  config["init_std"] = mc.init_std;
  std::ofstream f(out / "trajectory.json");
  f << nlohmann::json{{"config", config}, {"decay", decay}, {"steps", steps}}.dump(1) << "\n";
  TUPE_CHECK(f.good(), (out / "trajectory.json").string() << ": write failed");
  std::printf("trajectory_fixture: %lld steps, final loss %.6f, wrote %s\n", static_cast<long long>(n_steps),
              steps.back()["loss"].get<double>(), out.string().c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "trajectory_fixture: error: %s\n", e.what());
    return 1;
  }
}
