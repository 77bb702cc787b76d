#include "data_pipeline/corpus.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>

#include "common/error.h"
#include "data_pipeline/text/utf8.h"

namespace fs = std::filesystem;

namespace tupe::data {

DocumentBoundary parse_document_boundary(const std::string& key, const std::string& text) {
  if (text == "blank_line") return DocumentBoundary::kBlankLine;
  if (text == "line") return DocumentBoundary::kLine;
  TUPE_FAIL(key << ": expected blank_line or line, got '" << text << "'");
}

std::string to_string(DocumentBoundary b) { return b == DocumentBoundary::kBlankLine ? "blank_line" : "line"; }

namespace {

bool hidden(const fs::path& p) {
  const std::string name = p.filename().string();
  return !name.empty() && name[0] == '.';
}

InputFile checked_file(const fs::path& p) {
  std::error_code ec;
  const auto size = fs::file_size(p, ec);
  TUPE_CHECK(!ec, p.string() << ": cannot read size (" << ec.message() << ")");
  TUPE_CHECK(size > 0, p.string() << ": empty file");
  return {p.string(), static_cast<int64_t>(size)};
}

}  // namespace

std::vector<InputFile> list_input_files(const std::vector<std::string>& inputs) {
  TUPE_CHECK(!inputs.empty(), "preprocess: no input files given");
  std::vector<InputFile> files;
  std::set<std::string> seen;
  for (const auto& in : inputs) {
    const fs::path p(in);
    std::error_code ec;
    const auto st = fs::status(p, ec);
    TUPE_CHECK(!ec && fs::exists(st), in << ": no such file or directory");
    std::vector<fs::path> found;
    if (fs::is_directory(st)) {
      for (auto it = fs::recursive_directory_iterator(p, ec); !ec && it != fs::recursive_directory_iterator();
           it.increment(ec)) {
        if (hidden(it->path())) {
          if (it->is_directory()) it.disable_recursion_pending();
          continue;
        }
        if (it->is_regular_file()) found.push_back(it->path());
      }
      TUPE_CHECK(!ec, in << ": cannot list folder (" << ec.message() << ")");
      TUPE_CHECK(!found.empty(), in << ": folder holds no input files");
      std::sort(found.begin(), found.end());
    } else {
      TUPE_CHECK(fs::is_regular_file(st), in << ": not a regular file or folder");
      found.push_back(p);
    }
    for (const auto& f : found) {
      const std::string canon = fs::weakly_canonical(f, ec).string();
      TUPE_CHECK(seen.insert(ec ? f.string() : canon).second, f.string() << ": input file named twice");
      files.push_back(checked_file(f));
    }
  }
  return files;
}

std::string read_file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  TUPE_CHECK(in.good(), path << ": cannot open for reading");
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  TUPE_CHECK(size >= 0, path << ": cannot determine size");
  std::string bytes(static_cast<size_t>(size), '\0');
  in.seekg(0, std::ios::beg);
  in.read(bytes.data(), size);
  TUPE_CHECK(in.gcount() == size, path << ": read " << in.gcount() << " of " << size << " bytes");
  return bytes;
}

std::vector<DocumentSpan> split_documents(const std::string& path, std::string_view bytes, DocumentBoundary mode) {
  TUPE_CHECK(!bytes.empty(), path << ": empty file");
  const char* cause = nullptr;
  const size_t bad = find_invalid_utf8(bytes, &cause);
  TUPE_CHECK(bad == std::string_view::npos,
             path << ": invalid UTF-8 at byte " << bad << ": " << (cause ? cause : "malformed sequence"));
  const int64_t n = static_cast<int64_t>(bytes.size());
  int64_t pos = 0;
  if (bytes.substr(0, 3) == "\xEF\xBB\xBF") pos = 3;  // byte-order mark

  std::vector<DocumentSpan> docs;
  bool in_doc = false;
  DocumentSpan cur{0, 0};
  while (pos < n) {
    int64_t eol = pos;
    while (eol < n && bytes[static_cast<size_t>(eol)] != '\n') ++eol;
    bool blank = true;
    int64_t last_text = pos;  // one past the last character other than \r
    for (int64_t i = pos; i < eol; ++i) {
      const auto c = static_cast<unsigned char>(bytes[static_cast<size_t>(i)]);
      // Spaces and control characters (C0, DEL, and C1 = U+0080..U+009F, which tokenizers
      // drop) are no text: a line of them is blank.
      const bool c1 = c == 0xC2 && i + 1 < eol && static_cast<unsigned char>(bytes[static_cast<size_t>(i) + 1]) >= 0x80 &&
                      static_cast<unsigned char>(bytes[static_cast<size_t>(i) + 1]) <= 0x9F;
      if (c1) {
        ++i;
        continue;
      }
      if (c > 0x20 && c != 0x7F) blank = false;
      if (c != '\r') last_text = i + 1;
    }
    if (blank) {
      if (in_doc) docs.push_back(cur);
      in_doc = false;
    } else if (mode == DocumentBoundary::kLine) {
      docs.push_back({pos, last_text});
    } else if (in_doc) {
      cur.end = last_text;
    } else {
      cur = {pos, last_text};
      in_doc = true;
    }
    pos = eol + 1;
  }
  if (in_doc) docs.push_back(cur);
  TUPE_CHECK(!docs.empty(), path << ": no text (only blank lines, spaces or control characters)");
  return docs;
}

}  // namespace tupe::data
