// WordPiece throughput on one core: encodes every line of a text file (the file split on
// '\n', each line on its own, no special tokens), `--repeat` times, and prints the best
// time as tokens/s and MB/s. With --ids-out it writes the ids (one line per input line,
// space-separated) so bench/tokenizer_bench.sh can check them against HuggingFace.
//
// Usage: tokenizer_bench --vocab VOCAB.txt --text FILE [--cased] [--repeat N] [--ids-out F]
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "common/error.h"
#include "data_pipeline/text/wordpiece.h"

namespace {

struct Args {
  std::string vocab, text, ids_out;
  bool cased = false;
  int repeat = 5;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    auto value = [&]() -> std::string {
      TUPE_CHECK(i + 1 < argc, "tokenizer_bench: " << k << " needs a value");
      return argv[++i];
    };
    if (k == "--vocab") a.vocab = value();
    else if (k == "--text") a.text = value();
    else if (k == "--ids-out") a.ids_out = value();
    else if (k == "--cased") a.cased = true;
    else if (k == "--repeat") a.repeat = std::stoi(value());
    else TUPE_FAIL("tokenizer_bench: unknown option " << k);
  }
  TUPE_CHECK(!a.vocab.empty() && !a.text.empty(), "usage: tokenizer_bench --vocab V --text F [--cased] [--repeat N] [--ids-out F]");
  TUPE_CHECK(a.repeat >= 1, "tokenizer_bench: --repeat must be >= 1");
  return a;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Args args = parse(argc, argv);
    std::ifstream in(args.text, std::ios::binary);
    TUPE_CHECK(in.good(), args.text << ": cannot open");
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string bytes = ss.str();
    std::vector<std::string_view> lines;
    for (size_t start = 0;;) {
      const size_t end = bytes.find('\n', start);
      lines.emplace_back(bytes.data() + start, (end == std::string::npos ? bytes.size() : end) - start);
      if (end == std::string::npos) break;
      start = end + 1;
    }

    tupe::data_pipeline::WordPieceOptions o;
    o.vocab_path = args.vocab;
    o.lower_case = o.strip_accents = !args.cased;
    const tupe::data_pipeline::WordPieceTokenizer tokenizer(o);

    std::vector<std::vector<int32_t>> ids(lines.size());
    double best_s = 1e30;
    int64_t tokens = 0;
    for (int r = 0; r < args.repeat; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      tokens = 0;
      for (size_t i = 0; i < lines.size(); ++i) {
        ids[i].clear();
        tokenizer.encode_into(lines[i], ids[i]);
        tokens += static_cast<int64_t>(ids[i].size());
      }
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      best_s = std::min(best_s, s);
    }
    std::printf("tupe WordPiece: %zu lines, %lld tokens, %.1f MB, best of %d: %.4f s, %.0f tokens/s, %.2f MB/s\n",
                lines.size(), static_cast<long long>(tokens), bytes.size() / 1e6, args.repeat, best_s,
                tokens / best_s, bytes.size() / 1e6 / best_s);
    if (!args.ids_out.empty()) {
      std::ofstream out(args.ids_out, std::ios::binary);
      for (const auto& line : ids) {
        for (size_t k = 0; k < line.size(); ++k) out << (k ? " " : "") << line[k];
        out << '\n';
      }
      TUPE_CHECK(out.good(), args.ids_out << ": write failed");
    }
    return 0;
  } catch (const tupe::Error& e) {
    std::cerr << "tokenizer_bench: error: " << e.what() << "\n";
    return 1;
  }
}
