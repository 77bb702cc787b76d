// Loader throughput: masked batches per second of one rank (run by hand, not a test).
//   loader_bench [--shards DIR_OR_FILE] [--seq 128] [--batch 256] [--steps 400] [--threads 0,1]
//                [--world W]   (measures rank 0 of W: B / W rows per step) [--in-memory]
//                [--no-prefetch] (on demand: the batch's reads one after another, no read-ahead hint)
//                [--strategies token,whole_word,span --vocab VOCAB --rounds R] (data.mask_strategy
//                side by side: R interleaved rounds each, the median and its ratio to token)
// Without --shards it uses an in-memory dataset of random full-length sequences (BERT vocab
// size). Prints sequences/s (and tokens/s) per thread setting; threads = 0 builds in the
// calling thread (one core), threads = k builds in k background threads. Also sequences per
// CPU second (the process's CPU time over the timed steps, user + system): on a loaded
// machine the steadier figure of what the loader's work costs.
#include <time.h>

#include <boost/program_options.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <iostream>

#include "data_pipeline/counter_rng.h"
#include "data_pipeline/loader.h"
#include "data_pipeline/shard_set.h"
#include "data_pipeline/text/tokenizer_factory.h"

namespace po = boost::program_options;
using namespace tupe::data_pipeline;

namespace {

/// CPU time of the process so far (seconds, user + system, all threads).
double process_cpu_seconds() {
  struct timespec ts {};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

/// The dataset without its read-ahead hint (the reference for --no-prefetch).
class NoPrefetch final : public PretrainDataset {
 public:
  explicit NoPrefetch(std::shared_ptr<const PretrainDataset> d) : d_(std::move(d)) {}
  int64_t size() const override { return d_->size(); }
  int64_t length(int64_t i) const override { return d_->length(i); }
  int64_t ordinary_tokens(int64_t i) const override { return d_->ordinary_tokens(i); }
  int64_t static_mask_count(int64_t i) const override { return d_->static_mask_count(i); }
  void get(int64_t i, Sample& out) const override { d_->get(i, out); }
  const DatasetInfo& info() const override { return d_->info(); }
  ReadStats read_stats() const override { return d_->read_stats(); }

 private:
  std::shared_ptr<const PretrainDataset> d_;
};

}  // namespace

int main(int argc, char** argv) {
  std::string shards, threads_text, strategies_text, vocab;
  int64_t seq = 128, batch = 256, steps = 400, samples = 100000, world = 1, rounds = 1;
  po::options_description desc("loader_bench options");
  desc.add_options()("help", "this help")("shards", po::value(&shards), "shard file or folder (default: synthetic)")(
      "seq", po::value(&seq)->default_value(128), "synthetic sequence length (tokens)")(
      "samples", po::value(&samples)->default_value(100000), "synthetic samples")(
      "batch", po::value(&batch)->default_value(256), "global batch (one rank)")(
      "steps", po::value(&steps)->default_value(400), "timed steps")(
      "world", po::value(&world)->default_value(1), "simulated world size (this is rank 0)")(
      "threads", po::value(&threads_text)->default_value("0,1"), "comma-separated loader thread counts")(
      "in-memory", "load the shards into memory (default: read on demand)")(
      "no-prefetch", "no read-ahead hint for a batch's samples")(
      "strategies", po::value(&strategies_text)->default_value("token"),
      "comma-separated data.mask_strategy values, measured side by side")(
      "vocab", po::value(&vocab), "the shards' vocabulary (word boundaries of whole_word and span)")(
      "rounds", po::value(&rounds)->default_value(1), "interleaved rounds per strategy and thread count");
  po::variables_map vm;
  po::store(po::parse_command_line(argc, argv, desc), vm);
  po::notify(vm);
  if (vm.count("help")) {
    std::cout << desc << "\n";
    return 0;
  }
  try {
    std::shared_ptr<const PretrainDataset> ds;
    if (shards.empty()) {
      std::vector<std::vector<int32_t>> seqs(static_cast<size_t>(samples));
      CounterRng rng(rng_key(RngDomain::kSplit, 7, 7));
      for (auto& s : seqs) {
        s.resize(static_cast<size_t>(seq));
        s.front() = 101;
        s.back() = 102;
        for (int64_t j = 1; j + 1 < seq; ++j) s[static_cast<size_t>(j)] = 1000 + static_cast<int32_t>(rng.below(29000));
      }
      ds = make_memory_dataset(seqs, 30522, SpecialTokens{}, seq);
    } else {
      DatasetOptions o;
      o.vocab_size = 30522;
      o.in_memory = vm.count("in-memory") > 0;
      const auto t0 = std::chrono::steady_clock::now();
      ds = open_pretrain_dataset({shards}, o);
      if (vm.count("no-prefetch")) ds = std::make_shared<NoPrefetch>(ds);
      std::printf("open: %.2f s (%s)\n", std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
                  o.in_memory ? "in memory" : "on demand");
    }
    int64_t tokens_total = 0;
    for (const auto& s : ds->info().shards) tokens_total += s.tokens;
    std::printf("dataset: %lld samples, %lld tokens in %zu shards, max_seq_len %lld (%s), index %.1f MiB\n",
                static_cast<long long>(ds->size()), static_cast<long long>(tokens_total), ds->info().shards.size(),
                static_cast<long long>(ds->info().max_seq_len), ds->info().format.c_str(),
                static_cast<double>(ds->read_stats().index_bytes) / (1 << 20));
    std::shared_ptr<const WordBoundaries> words;
    if (!vocab.empty()) {
      TokenizerOptions t;
      t.vocab = vocab;
      t.kind = resolve_tokenizer_kind(t, false);
      words = WordBoundaries::of(*make_tokenizer(t));
    }
    std::map<std::pair<std::string, std::string>, std::vector<double>> per_cpu_second;  // (threads, strategy)
    for (int64_t round = 0; round < rounds; ++round)
    for (const auto& t : tupe::split_comma_list(threads_text))
    for (const auto& strategy : tupe::split_comma_list(strategies_text)) {
      DataOptions cfg;
      cfg.global_batch_size = batch;
      cfg.num_threads = std::stoll(t);
      cfg.mask_strategy = tupe::parse_choice("--strategies", strategy, kMaskStrategyWords);
      Loader loader(ds, cfg, 0, world, {}, {}, words);
      for (int i = 0; i < 5; ++i) loader.next();  // warm-up
      int64_t rows = 0, tokens = 0, masked = 0;
      const double cpu0 = process_cpu_seconds();
      const auto t0 = std::chrono::steady_clock::now();
      for (int64_t i = 0; i < steps; ++i) {
        MlmBatch b = loader.next();
        rows += b.rows();
        tokens += b.attention_mask.sum().item<int64_t>();
        masked += b.masked_positions.size(0);
      }
      const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      const double cpu = process_cpu_seconds() - cpu0;
      per_cpu_second[{t, strategy}].push_back(static_cast<double>(rows) / cpu);
      std::printf(
          "world=%lld threads=%s %s  %.0f sequences/s  %.2f Mtokens/s  masked %.2f%%  (%lld steps of %lld rows, %.2f s)"
          "  %.0f sequences per CPU second (%.2f s)\n",
          static_cast<long long>(world), t.c_str(), strategy.c_str(), static_cast<double>(rows) / secs,
          static_cast<double>(tokens) / secs / 1e6, 100.0 * static_cast<double>(masked) / static_cast<double>(tokens),
          static_cast<long long>(steps), static_cast<long long>(batch / world), secs, static_cast<double>(rows) / cpu,
          cpu);
    }
    // Medians over the rounds, and each strategy's ratio to token (same thread count).
    const auto median = [](std::vector<double> v) {
      std::sort(v.begin(), v.end());
      return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
    };
    for (const auto& [key, values] : per_cpu_second) {
      const auto token = per_cpu_second.find({key.first, "token"});
      const double m = median(values);
      std::printf("median threads=%s %-10s %.0f sequences per CPU second over %zu rounds", key.first.c_str(),
                  key.second.c_str(), m, values.size());
      if (token != per_cpu_second.end()) std::printf("  ratio to token %.3f", m / median(token->second));
      std::printf("\n");
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "loader_bench: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
