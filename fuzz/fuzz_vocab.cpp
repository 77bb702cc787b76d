// Fuzz target for the vocab reader: tupe::data_pipeline::read_wordpiece_vocab(path, &sha256)
// (data_pipeline/text/wordpiece.cpp). Each input is written to /dev/shm and read as a
// vocab.txt; when it loads and holds the five special tokens, a WordPieceTokenizer is built
// from it and encodes/decodes a fixed text (the vocabulary index over fuzzed tokens).
// Expected on bad input: tupe::Error. A finding is anything else: a crash or sanitizer
// report, another exception type, a hang, a huge allocation, or a result that breaks the
// reader's contract (an empty/duplicate token, a SHA-256 that is not 64 hex digits).
#include <cstdint>
#include <set>
#include <string>

#include "common/error.h"
#include "data_pipeline/text/wordpiece.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::filesystem::path path = tupe_fuzz::scratch_dir("vocab") / "vocab.txt";
  tupe_fuzz::write_file(path, data, size);
  std::vector<std::string> tokens;
  try {
    std::string sha;
    tokens = tupe::data_pipeline::read_wordpiece_vocab(path.string(), &sha);
    if (sha.size() != 64) tupe_fuzz::fail("sha256 is not 64 hex digits");
    std::set<std::string> seen;
    for (const auto& t : tokens)
      if (t.empty() || !seen.insert(t).second) tupe_fuzz::fail("empty or duplicate token returned");
    tupe_fuzz::note("read_wordpiece_vocab: accepted");
  } catch (const tupe::Error& e) {
    tupe_fuzz::note(e.what());
    return 0;
  }
  try {
    tupe::data_pipeline::WordPieceOptions options;
    options.vocab_path = path.string();
    options.lower_case = size % 2 == 0;
    options.strip_accents = options.lower_case;
    const tupe::data_pipeline::WordPieceTokenizer tok(options);
    const auto ids = tok.encode("Hello, [CLS] unaffable w\xC3\xB6rld! \xE4\xB8\xAD\xE6\x96\x87 ##ing [MASK]x running");
    for (int32_t id : ids)
      if (id < 0 || id >= tok.vocab_size()) tupe_fuzz::fail("encode returned an id outside the vocabulary");
    (void)tok.decode(ids);
    tupe_fuzz::note("tokenizer: accepted");
  } catch (const tupe::Error& e) {
    tupe_fuzz::note(e.what());
  }
  return 0;
}
