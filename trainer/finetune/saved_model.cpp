#include "trainer/finetune/saved_model.h"

#include "checkpoint/checkpoint_store.h"
#include "checkpoint/durable_io.h"

namespace tupe::finetune {

namespace fs = std::filesystem;

checkpoint::NamedTensors finetuned_parameters(model::TupeBertImpl& model) {
  checkpoint::NamedTensors out;
  for (const auto& item : model.named_parameters())
    if (item.key().rfind("mlm_head.", 0) != 0) out.emplace_back(item.key(), item.value());
  return out;
}

fs::path save_finetuned_model(const fs::path& dir, int64_t steps, const checkpoint::NamedTensors& weights,
                              const KeyValues& config, const std::string& vocab_sha256,
                              checkpoint::TokenizerRecord tokenizer, const fs::path& vocab) {
  checkpoint::CheckpointOptions options;
  options.dir = dir.string();
  options.every_steps = 0;
  options.keep_last = 1;
  options.keep_every = 0;
  checkpoint::CheckpointStore store(options);
  checkpoint::CheckpointContents contents;
  contents.model = weights;
  contents.optimizer.metadata = {{"optimizer", "none"}, {"note", "fine-tuned model: no optimizer state"}};
  contents.state.step = steps;
  contents.state.scheduler_step = steps;
  contents.state.config = config;
  contents.state.vocab_sha256 = vocab_sha256;
  tokenizer.vocab_file = tokenizer.kind == "sentencepiece" ? "spm.model" : "vocab.txt";
  contents.state.tokenizer = tokenizer;
  contents.vocab_bytes = checkpoint::read_file_bytes(vocab);
  return store.save(contents);
}

}  // namespace tupe::finetune
