// Builds a large pre-training corpus for bench/corpus_scale.sh (run by hand, not a test):
// the samples of real shards (e.g. WikiText-2's train split) repeated until --tokens, written
// with the project's shard writer as one complete shard set of --shards files (the current
// format version, unfiltered unless --compression). Memory stays at one source copy plus the writer's buffer.
//   make_corpus --from SHARDS_DIR --out DIR --tokens 1000000000 --shards 16 [--compression 0]
#include <boost/program_options.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "data_pipeline/hdf5_util.h"
#include "data_pipeline/shard_writer.h"
#include "data_pipeline/dataset.h"

namespace po = boost::program_options;
using namespace tupe::data_pipeline;

int main(int argc, char** argv) {
  std::string from, out;
  int64_t tokens = 1000000000, shards = 16, compression = 0;
  po::options_description desc("make_corpus options");
  desc.add_options()("help", "this help")("from", po::value(&from), "source shard folder (train split)")(
      "out", po::value(&out), "output folder (created; must hold no shards)")(
      "tokens", po::value(&tokens)->default_value(tokens), "tokens to write (at least)")(
      "shards", po::value(&shards)->default_value(shards), "shard files")(
      "compression", po::value(&compression)->default_value(0), "deflate level 0..9");
  po::variables_map vm;
  po::store(po::parse_command_line(argc, argv, desc), vm);
  po::notify(vm);
  if (vm.count("help") || from.empty() || out.empty()) {
    std::cout << desc << "\n";
    return vm.count("help") ? 0 : 2;
  }
  try {
    DatasetOptions o;
    o.in_memory = true;
    const auto src = open_pretrain_dataset({from}, o);
    ShardHeader h;
    {
      h5::Lock lock;
      h5::Id file = h5::open_file_readonly(src->info().files.front());
      h = read_shard_header(src->info().files.front(), file.get());
    }
    h.num_shards = shards;
    h.command_line = "make_corpus --from " + from + " --tokens " + std::to_string(tokens);
    h.run_id = "bench" + std::to_string(tokens);
    std::filesystem::create_directories(out);
    ShardWriterOptions wopt;
    wopt.compression_level = compression;
    const auto t0 = std::chrono::steady_clock::now();
    const int64_t per_shard = (tokens + shards - 1) / shards;
    int64_t next = 0, written = 0;
    Sample s;
    for (int64_t k = 0; k < shards; ++k) {
      h.shard_index = k;
      ShardWriter w((std::filesystem::path(out) / shard_file_name("train", k, shards)).string(), h, wopt);
      while (w.num_tokens() < per_shard) {
        src->get(next, s);
        next = (next + 1) % src->size();
        w.append(s.token_ids.data(), static_cast<int64_t>(s.token_ids.size()));
      }
      w.close();
      w.commit();
      written += w.num_tokens();
      const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::fprintf(stderr, "make_corpus: shard %lld/%lld, %.2f G tokens, %.0f s\n", static_cast<long long>(k + 1),
                   static_cast<long long>(shards), static_cast<double>(written) / 1e9, secs);
    }
    std::printf("wrote %lld tokens in %lld shards to %s\n", static_cast<long long>(written),
                static_cast<long long>(shards), out.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "make_corpus: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
