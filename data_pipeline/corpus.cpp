#include "data_pipeline/corpus.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include "common/error.h"
#include "data_pipeline/corpus_stream.h"
#include "data_pipeline/text/utf8.h"

namespace fs = std::filesystem;

namespace tupe::data_pipeline {

DocumentBoundary parse_document_boundary(const std::string& key, const std::string& text) {
  return parse_choice(key, text, kDocumentBoundaryWords);
}

std::string to_string(DocumentBoundary b) { return choice_word(b, kDocumentBoundaryWords); }

LineInfo classify_line(std::string_view bytes, int64_t pos, int64_t eol) {
  LineInfo info;
  info.last_text = pos;
  for (int64_t i = pos; i < eol; ++i) {
    const auto c = static_cast<unsigned char>(bytes[static_cast<size_t>(i)]);
    const bool c1 = c == 0xC2 && i + 1 < eol && static_cast<unsigned char>(bytes[static_cast<size_t>(i) + 1]) >= 0x80 &&
                    static_cast<unsigned char>(bytes[static_cast<size_t>(i) + 1]) <= 0x9F;
    if (c1) {
      ++i;
      continue;
    }
    if (c > 0x20 && c != 0x7F) info.blank = false;
    if (c != '\r') info.last_text = i + 1;
  }
  return info;
}

void check_utf8(const std::string& path, std::string_view bytes, int64_t base) {
  const char* cause = nullptr;
  const size_t bad = find_invalid_utf8(bytes, &cause);
  TUPE_CHECK(bad == std::string_view::npos, path << ": invalid UTF-8 at byte " << base + static_cast<int64_t>(bad) << ": "
                                                 << (cause ? cause : "malformed sequence"));
}


namespace {

bool hidden(const fs::path& p) {
  const std::string name = p.filename().string();
  return !name.empty() && name[0] == '.';
}

/// The first (up to) 8 bytes of a file.
std::string file_head(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  TUPE_CHECK(in.good(), path << ": cannot open for reading");
  std::string head(8, '\0');
  in.read(head.data(), 8);
  head.resize(static_cast<size_t>(in.gcount()));
  return head;
}

InputFile checked_file(const fs::path& p) {
  std::error_code ec;
  const auto size = fs::file_size(p, ec);
  TUPE_CHECK(!ec, p.string() << ": cannot read size (" << ec.message() << ")");
  TUPE_CHECK(size > 0, p.string() << ": empty file");
  InputFile file{p.string(), static_cast<int64_t>(size), detect_compression(p.string())};
  if (file.compression == Compression::kNone) file.columnar = detect_columnar(file.path, file_head(file.path));
  return file;
}

/// Regular files under `dir`, recursively, hidden ones skipped; a save_to_disk folder gives
/// its data files only.
void find_files(const fs::path& dir, const std::string& given, std::vector<fs::path>& found) {
  const auto data_files = datasets_folder_files(dir);
  if (!data_files.empty()) {
    found.insert(found.end(), data_files.begin(), data_files.end());
    return;
  }
  std::error_code ec;
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    if (hidden(it->path())) continue;
    if (it->is_directory()) {
      if (!it->is_symlink()) find_files(it->path(), given, found);  // as recursive_directory_iterator: no linked folders
    } else if (it->is_regular_file())
      found.push_back(it->path());
  }
  TUPE_CHECK(!ec, given << ": cannot list folder " << dir.string() << " (" << ec.message() << ")");
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
      find_files(p, in, found);
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

namespace {

/// pread-based reads of one file.
class FileBytes {
 public:
  explicit FileBytes(const std::string& path) : path_(path), fd_(::open(path.c_str(), O_RDONLY | O_CLOEXEC)) {
    TUPE_CHECK(fd_ >= 0, path << ": cannot open for reading (" << std::strerror(errno) << ")");
  }
  ~FileBytes() { ::close(fd_); }
  FileBytes(const FileBytes&) = delete;
  FileBytes& operator=(const FileBytes&) = delete;
  /// Appends bytes [offset, offset + n) of the file (fewer at its end) to `out`; returns how many.
  int64_t append(std::string& out, int64_t offset, int64_t n) const {
    const size_t at = out.size();
    out.resize(at + static_cast<size_t>(n));
    int64_t got = 0;
    while (got < n) {
      const ssize_t r = ::pread(fd_, out.data() + at + got, static_cast<size_t>(n - got), static_cast<off_t>(offset + got));
      if (r < 0 && errno == EINTR) continue;
      TUPE_CHECK(r >= 0, path_ << ": read failed at byte " << offset + got << " (" << std::strerror(errno) << ")");
      if (r == 0) break;
      got += r;
    }
    out.resize(at + static_cast<size_t>(got));
    return got;
  }

 private:
  std::string path_;
  int fd_;
};

constexpr int64_t kReadBlock = int64_t{1} << 16;

/// Offset of the first byte after the byte-order mark, if any.
int64_t data_start(const FileBytes& file) {
  std::string head;
  file.append(head, 0, 3);
  return head == "\xEF\xBB\xBF" ? 3 : 0;
}

}  // namespace

std::vector<DocumentSpan> split_documents(const std::string& path, std::string_view bytes, DocumentBoundary mode) {
  TUPE_CHECK(!bytes.empty(), path << ": empty file");
  check_utf8(path, bytes, 0);
  const int64_t n = static_cast<int64_t>(bytes.size());
  int64_t pos = 0;
  if (bytes.substr(0, 3) == "\xEF\xBB\xBF") pos = 3;  // byte-order mark

  std::vector<DocumentSpan> docs;
  bool in_doc = false;
  DocumentSpan cur{0, 0};
  while (pos < n) {
    int64_t eol = pos;
    while (eol < n && bytes[static_cast<size_t>(eol)] != '\n') ++eol;
    const LineInfo line = classify_line(bytes, pos, eol);
    if (line.blank) {
      if (in_doc) docs.push_back(cur);
      in_doc = false;
    } else if (mode == DocumentBoundary::kLine) {
      docs.push_back({pos, line.last_text});
    } else if (in_doc) {
      cur.end = line.last_text;
    } else {
      cur = {pos, line.last_text};
      in_doc = true;
    }
    pos = eol + 1;
  }
  if (in_doc) docs.push_back(cur);
  TUPE_CHECK(!docs.empty(), path << ": no text (only blank lines, spaces or control characters)");
  return docs;
}

PieceText read_piece(const std::string& path, int64_t file_bytes, int64_t begin, int64_t end, DocumentBoundary mode,
                     bool check_utf8_text) {
  const FileBytes file(path);
  PieceText out;
  const int64_t start = data_start(file);
  // s0: the first line start at or after `begin`; prev_blank: whether the line before it
  // holds no text (a document can only start after such a line, in blank_line mode).
  int64_t s0 = start;
  bool prev_blank = true;
  if (begin > start) {
    s0 = -1;
    std::string buf;
    for (int64_t at = begin - 1; at < file_bytes && s0 < 0; at += kReadBlock) {
      buf.clear();
      file.append(buf, at, kReadBlock);
      const size_t nl = buf.find('\n');
      if (nl != std::string::npos) s0 = at + static_cast<int64_t>(nl) + 1;
    }
    if (s0 < 0 || s0 >= file_bytes || s0 >= end) {
      out.base = std::min(std::max(s0, begin), file_bytes);
      return out;  // no line starts in the piece
    }
    if (mode == DocumentBoundary::kBlankLine) {
      // The line before s0 (ending in the \n at s0 - 1), read backwards to its start.
      std::string line;
      for (int64_t stop = s0 - 1; stop > start;) {
        const int64_t from = std::max(start, stop - kReadBlock);
        std::string chunk;
        file.append(chunk, from, stop - from);
        const size_t nl = chunk.rfind('\n');
        line.insert(0, nl == std::string::npos ? chunk : chunk.substr(nl + 1));
        if (nl != std::string::npos) break;
        stop = from;
      }
      prev_blank = classify_line(line, 0, static_cast<int64_t>(line.size())).blank;
    }
  }
  // Forward from s0: every line starting before `end`, then the rest of the last document.
  out.base = s0;
  std::string& bytes = out.bytes;
  int64_t read_to = s0;  // file offset one past the bytes read
  auto more = [&] {
    const int64_t got = file.append(bytes, read_to, std::max<int64_t>(kReadBlock, end - read_to));
    read_to += got;
    return got > 0;
  };
  bool in_doc = mode == DocumentBoundary::kBlankLine && !prev_blank;  // in a document of an earlier piece
  bool ours = false;
  DocumentSpan cur{0, 0};
  int64_t pos = 0;  // offset into bytes
  while (true) {
    if (out.base + pos >= end && !(in_doc && ours)) break;
    if (out.base + pos >= file_bytes) break;
    size_t nl;
    while ((nl = bytes.find('\n', static_cast<size_t>(pos))) == std::string::npos && more()) {
    }
    const int64_t eol = nl == std::string::npos ? static_cast<int64_t>(bytes.size()) : static_cast<int64_t>(nl);
    if (eol <= pos && nl == std::string::npos) break;  // end of file
    const LineInfo line = classify_line(bytes, pos, eol);
    if (line.blank) {
      if (in_doc && ours) out.docs.push_back(cur);
      in_doc = false;
    } else if (mode == DocumentBoundary::kLine) {
      out.docs.push_back({pos, line.last_text});
    } else if (in_doc) {
      if (ours) cur.end = line.last_text;
    } else {
      cur = {pos, line.last_text};
      in_doc = ours = true;
    }
    pos = eol + 1;
  }
  if (in_doc && ours) out.docs.push_back(cur);
  const auto checked = static_cast<size_t>(std::min<int64_t>(pos, static_cast<int64_t>(bytes.size())));
  if (check_utf8_text) check_utf8(path, std::string_view(bytes).substr(0, checked), out.base);
  bytes.resize(checked);
  return out;
}

bool file_has_text(const std::string& path, int64_t file_bytes) {
  const FileBytes file(path);
  const int64_t start = data_start(file);
  std::string carry;  // an unfinished line
  for (int64_t at = start; at < file_bytes; at += kReadBlock) {
    file.append(carry, at, kReadBlock);
    size_t pos = 0, nl;
    while ((nl = carry.find('\n', pos)) != std::string::npos) {
      if (!classify_line(carry, static_cast<int64_t>(pos), static_cast<int64_t>(nl)).blank) return true;
      pos = nl + 1;
    }
    carry.erase(0, pos);
  }
  return !classify_line(carry, 0, static_cast<int64_t>(carry.size())).blank;
}

}  // namespace tupe::data_pipeline
