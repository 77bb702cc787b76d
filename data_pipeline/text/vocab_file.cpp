#include "data_pipeline/text/vocab_file.h"

#include <sentencepiece_processor.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string_view>

#include "common/error.h"
#include "data_pipeline/text/utf8.h"

namespace tupe::data_pipeline {

namespace {

/// UTF-8 text: valid UTF-8, and no byte below 0x20 but tab, CR and LF (a protobuf has tags
/// such as 0x08, 0x10, 0x15 and NUL bytes of zero-valued fields and floats).
bool is_text(std::string_view bytes) {
  for (const char c : bytes) {
    const auto b = static_cast<unsigned char>(c);
    if (b < 0x20 && b != '\t' && b != '\r' && b != '\n') return false;
  }
  return find_invalid_utf8(bytes, nullptr) == std::string_view::npos;
}

/// The first line is "<piece>\t<number>" (SentencePiece's .vocab listing: "<unk>\t0").
bool is_listing(std::string_view bytes) {
  std::string_view line = bytes.substr(0, bytes.find('\n'));
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  const size_t tab = line.rfind('\t');
  if (tab == std::string_view::npos || tab == 0 || tab + 1 == line.size()) return false;
  const std::string score(line.substr(tab + 1));
  char* end = nullptr;
  std::strtod(score.c_str(), &end);
  return end == score.c_str() + score.size();
}

}  // namespace

std::string read_vocab_bytes(const std::string& path) {
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  TUPE_CHECK(f != nullptr, path << ": cannot open: " << std::strerror(errno));
  std::string bytes;
  char buf[1 << 16];
  while (true) {
    const size_t got = std::fread(buf, 1, sizeof(buf), f.get());
    TUPE_CHECK(!std::ferror(f.get()), path << ": cannot read: " << std::strerror(errno));
    bytes.append(buf, got);
    if (got < sizeof(buf)) break;
  }
  return bytes;
}

VocabFileContent sniff_vocab_file(const std::string& path) {
  const std::string bytes = read_vocab_bytes(path);
  if (is_text(bytes)) return is_listing(bytes) ? VocabFileContent::kSentencePieceListing : VocabFileContent::kText;
  sentencepiece::SentencePieceProcessor sp;
  if (sp.LoadFromSerializedProto(absl::string_view(bytes.data(), bytes.size())).ok())
    return VocabFileContent::kSentencePieceModel;
  return VocabFileContent::kOther;
}

std::string model_beside_listing(const std::string& listing_path) {
  const std::string suffix = ".vocab";
  if (listing_path.size() <= suffix.size() ||
      listing_path.compare(listing_path.size() - suffix.size(), suffix.size(), suffix) != 0)
    return "";
  return listing_path.substr(0, listing_path.size() - suffix.size()) + ".model";
}

}  // namespace tupe::data_pipeline
