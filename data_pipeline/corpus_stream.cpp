#include "data_pipeline/corpus_stream.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <vector>

#include "common/error.h"

namespace tupe::data_pipeline {

std::string to_string(Compression c) {
  switch (c) {
    case Compression::kGzip: return "gzip";
    case Compression::kZstd: return "zstd";
    case Compression::kNone: break;
  }
  return "none";
}

namespace {

constexpr size_t kChunk = size_t{1} << 18;  // bytes per read of the file and of decompressed text

/// A file read in order with read(2).
class InFile {
 public:
  explicit InFile(const std::string& path) : path_(path), fd_(::open(path.c_str(), O_RDONLY | O_CLOEXEC)) {
    TUPE_CHECK(fd_ >= 0, path << ": cannot open for reading (" << std::strerror(errno) << ")");
  }
  ~InFile() { ::close(fd_); }
  InFile(const InFile&) = delete;
  InFile& operator=(const InFile&) = delete;
  /// Up to `n` bytes into `out`; 0 at the end of the file.
  size_t read(char* out, size_t n) {
    while (true) {
      const ssize_t r = ::read(fd_, out, n);
      if (r < 0 && errno == EINTR) continue;
      TUPE_CHECK(r >= 0, path_ << ": read failed at byte " << offset_ << " (" << std::strerror(errno) << ")");
      offset_ += r;
      return static_cast<size_t>(r);
    }
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_;
  int64_t offset_ = 0;
};

class PlainSource final : public ByteSource {
 public:
  explicit PlainSource(const std::string& path) : in_(path) {}
  size_t read(char* out, size_t n) override {
    const size_t got = in_.read(out, n);
    consumed_ += static_cast<int64_t>(got);
    return got;
  }
  int64_t consumed() const override { return consumed_; }

 private:
  InFile in_;
  int64_t consumed_ = 0;
};

/// gzip through zlib's inflate (RFC 1952 header and CRC-32 checked); members one after another.
class GzipSource final : public ByteSource {
 public:
  explicit GzipSource(const std::string& path) : in_(path), buf_(kChunk) {
    TUPE_CHECK(inflateInit2(&zs_, 15 + 16) == Z_OK, path << ": zlib cannot start (" << (zs_.msg ? zs_.msg : "?") << ")");
  }
  ~GzipSource() override { inflateEnd(&zs_); }
  size_t read(char* out, size_t n) override {
    zs_.next_out = reinterpret_cast<Bytef*>(out);
    zs_.avail_out = static_cast<uInt>(std::min<size_t>(n, UINT32_MAX));
    const uInt want = zs_.avail_out;
    while (zs_.avail_out > 0) {
      if (zs_.avail_in == 0 && !eof_) refill();
      if (member_done_) {
        if (zs_.avail_in == 0 && eof_) break;  // the end, after a whole member
        TUPE_CHECK(inflateReset(&zs_) == Z_OK, in_.path() << ": zlib cannot restart");
        member_done_ = false;
      }
      TUPE_CHECK(zs_.avail_in > 0 || !eof_, in_.path() << ": truncated gzip stream (the file ends inside a member, after "
                                                        << read_ << " bytes)");
      const int r = inflate(&zs_, Z_NO_FLUSH);
      if (r == Z_STREAM_END) {
        member_done_ = true;
      } else if (r != Z_OK && r != Z_BUF_ERROR) {
        TUPE_FAIL(in_.path() << ": corrupt gzip data at compressed byte " << consumed() << " ("
                             << (zs_.msg ? zs_.msg : "error " + std::to_string(r)) << ")");
      }
    }
    return want - zs_.avail_out;
  }
  int64_t consumed() const override { return read_ - static_cast<int64_t>(zs_.avail_in); }

 private:
  void refill() {
    const size_t got = in_.read(buf_.data(), buf_.size());
    eof_ = got == 0;
    read_ += static_cast<int64_t>(got);
    zs_.next_in = reinterpret_cast<Bytef*>(buf_.data());
    zs_.avail_in = static_cast<uInt>(got);
  }

  InFile in_;
  std::vector<char> buf_;
  z_stream zs_{};
  bool eof_ = false, member_done_ = false;
  int64_t read_ = 0;
};

/// Zstandard through libzstd's streaming decoder (frames one after another, checksums checked).
class ZstdSource final : public ByteSource {
 public:
  explicit ZstdSource(const std::string& path) : in_(path), buf_(ZSTD_DStreamInSize()), ds_(ZSTD_createDStream()) {
    TUPE_CHECK(ds_ != nullptr, path << ": libzstd cannot start");
  }
  ~ZstdSource() override { ZSTD_freeDStream(ds_); }
  size_t read(char* out, size_t n) override {
    ZSTD_outBuffer o{out, n, 0};
    while (o.pos < o.size) {
      if (zin_.pos == zin_.size && !eof_) refill();
      if (zin_.pos == zin_.size && eof_ && last_ == 0) break;  // the end, after a whole frame
      const size_t out_before = o.pos, in_before = zin_.pos;
      const size_t r = ZSTD_decompressStream(ds_, &o, &zin_);
      TUPE_CHECK(!ZSTD_isError(r), in_.path() << ": corrupt zstd data at compressed byte " << consumed() << " ("
                                              << ZSTD_getErrorName(r) << ")");
      last_ = r;
      TUPE_CHECK(!(o.pos == out_before && zin_.pos == in_before && zin_.pos == zin_.size && eof_ && r != 0),
                 in_.path() << ": truncated zstd stream (the file ends inside a frame, after " << read_ << " bytes)");
    }
    return o.pos;
  }
  int64_t consumed() const override { return read_ - static_cast<int64_t>(zin_.size - zin_.pos); }

 private:
  void refill() {
    const size_t got = in_.read(buf_.data(), buf_.size());
    eof_ = got == 0;
    read_ += static_cast<int64_t>(got);
    zin_ = ZSTD_inBuffer{buf_.data(), got, 0};
  }

  InFile in_;
  std::vector<char> buf_;
  ZSTD_DStream* ds_;
  ZSTD_inBuffer zin_{nullptr, 0, 0};
  size_t last_ = 0;  // the decoder's last hint: 0 = at a frame boundary
  bool eof_ = false;
  int64_t read_ = 0;
};

}  // namespace

Compression detect_compression(const std::string& path) {
  InFile in(path);
  unsigned char head[4] = {0, 0, 0, 0};
  size_t got = 0;
  while (got < 4) {
    const size_t r = in.read(reinterpret_cast<char*>(head) + got, 4 - got);
    if (r == 0) break;
    got += r;
  }
  if (got >= 2 && head[0] == 0x1F && head[1] == 0x8B) return Compression::kGzip;
  if (got == 4 && head[0] == 0x28 && head[1] == 0xB5 && head[2] == 0x2F && head[3] == 0xFD) return Compression::kZstd;
  if (got == 4 && (head[0] & 0xF0) == 0x50 && head[1] == 0x2A && head[2] == 0x4D && head[3] == 0x18)
    return Compression::kZstd;  // a skippable frame
  return Compression::kNone;
}

bool is_json_lines(const std::string& path, InputFormat format) {
  if (format != InputFormat::kAuto) return format == InputFormat::kJsonLines;
  std::filesystem::path p = std::filesystem::path(path).filename();
  for (const char* ext : {".gz", ".gzip", ".zst", ".zstd"})
    if (p.extension() == ext) {
      p = p.stem();
      break;
    }
  const std::string ext = p.extension().string();
  return ext == ".jsonl" || ext == ".json" || ext == ".ndjson";
}

std::unique_ptr<ByteSource> open_byte_source(const std::string& path, Compression compression) {
  switch (compression) {
    case Compression::kGzip: return std::make_unique<GzipSource>(path);
    case Compression::kZstd: return std::make_unique<ZstdSource>(path);
    case Compression::kNone: break;
  }
  return std::make_unique<PlainSource>(path);
}

namespace {

/// SAX handler that keeps the string value of one top-level key and builds nothing else.
class TextFieldSax final : public nlohmann::json_sax<nlohmann::json> {
 public:
  TextFieldSax(const std::string& field, std::string& text) : field_(field), text_(text) {}
  bool null() override { return value("null"); }
  bool boolean(bool) override { return value("boolean"); }
  bool number_integer(number_integer_t) override { return value("number"); }
  bool number_unsigned(number_unsigned_t) override { return value("number"); }
  bool number_float(number_float_t, const string_t&) override { return value("number"); }
  bool string(string_t& s) override {
    if (wanted_ && !found_) {
      text_ = std::move(s);
      found_ = true;
      type_ = "string";
    }
    return value(nullptr);
  }
  bool binary(binary_t&) override { return value("binary"); }
  bool start_object(std::size_t) override {
    if (depth_ == 0) object_ = true;
    value("object");
    ++depth_;
    return true;
  }
  bool key(string_t& k) override {
    wanted_ = depth_ == 1 && k == field_;
    return true;
  }
  bool end_object() override {
    --depth_;
    return true;
  }
  bool start_array(std::size_t) override {
    value("array");
    ++depth_;
    return true;
  }
  bool end_array() override {
    --depth_;
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    error_ = e.what();
    const size_t bracket = error_.find("] ");  // "[json.exception.parse_error.101] parse error at ..."
    if (error_.rfind("[json.exception", 0) == 0 && bracket != std::string::npos) error_.erase(0, bracket + 2);
    for (char& c : error_)  // the parser quotes what it last read, which may be a broken byte
      if (static_cast<unsigned char>(c) >= 0x80) c = '?';
    return false;
  }

  bool object() const { return object_; }
  bool found() const { return found_; }
  const char* type() const { return type_; }
  const std::string& error() const { return error_; }

 private:
  /// A value starts: the field's value when the last key was the field (first occurrence).
  bool value(const char* type) {
    if (wanted_ && !found_ && type != nullptr && type_ == nullptr) type_ = type;
    wanted_ = false;
    return true;
  }

  const std::string& field_;
  std::string& text_;
  int depth_ = 0;
  bool object_ = false, wanted_ = false, found_ = false;
  const char* type_ = nullptr;  // type of the field's first value
  std::string error_;
};

}  // namespace

bool json_record_text(std::string_view record, const std::string& field, std::string& text, std::string& error) {
  TextFieldSax sax(field, text);
  text.clear();
  const bool ok = nlohmann::json::sax_parse(record.begin(), record.end(), &sax, nlohmann::json::input_format_t::json, true);
  if (!ok) {
    error = "invalid JSON (" + (sax.error().empty() ? std::string("parse error") : sax.error()) + ")";
    return false;
  }
  if (!sax.object()) {
    error = "not a JSON object";
    return false;
  }
  if (!sax.found()) {
    error = sax.type() == nullptr ? "no \"" + field + "\" field"
                                  : "field \"" + field + "\" is a" + (std::string("aeiou").find(sax.type()[0]) != std::string::npos ? "n " : " ") +
                                        sax.type() + ", not a string";
    return false;
  }
  return true;
}

namespace {

/// The lines of a ByteSource, each without its \n, with its offset and number.
class LineReader {
 public:
  explicit LineReader(ByteSource& source) : source_(source) {}
  /// The next line (valid until the next call); false at the end.
  bool next(std::string_view& line, int64_t& offset) {
    while (true) {
      const size_t nl = buf_.find('\n', scan_);
      if (nl != std::string::npos) return take(nl, nl + 1, line, offset);
      scan_ = buf_.size();
      if (eof_) return pos_ < buf_.size() ? take(buf_.size(), buf_.size(), line, offset) : false;
      buf_.erase(0, pos_);
      base_ += static_cast<int64_t>(pos_);
      scan_ -= pos_;
      pos_ = 0;
      const size_t old = buf_.size();
      buf_.resize(old + kChunk);
      const size_t got = source_.read(buf_.data() + old, kChunk);
      buf_.resize(old + got);
      eof_ = got == 0;
    }
  }
  int64_t line_number() const { return line_number_; }
  /// Offset one past the last byte read so far.
  int64_t end_offset() const { return base_ + static_cast<int64_t>(buf_.size()); }

 private:
  bool take(size_t stop, size_t next, std::string_view& line, int64_t& offset) {
    line = std::string_view(buf_).substr(pos_, stop - pos_);
    offset = base_ + static_cast<int64_t>(pos_);
    pos_ = scan_ = next;
    ++line_number_;
    return true;
  }

  ByteSource& source_;
  std::string buf_;
  size_t pos_ = 0, scan_ = 0;  // start of the next line; where the search for \n resumes
  int64_t base_ = 0;           // offset of buf_[0]
  int64_t line_number_ = 0;
  bool eof_ = false;
};

}  // namespace

int64_t stream_documents(const InputFile& file, const StreamOptions& options, const DocumentCallbacks& callbacks) {
  const auto source = open_byte_source(file.path, file.compression);
  LineReader lines(*source);
  const std::string& path = file.path;
  std::string_view line;
  int64_t offset = 0, documents = 0, next_progress = 0;
  // Plain text, blank_line mode: a document's line is given once the next line shows whether
  // it was the document's last (for_each_line ends the last one at its last text character,
  // the others at their line break less one \r); usually both cuts agree and no copy is kept.
  std::string pending;
  bool has_pending = false, in_doc = false, wanted = false;
  auto flush_pending = [&](bool last) {
    if (!has_pending) return;
    const std::string_view p(pending);
    callbacks.line(last ? p.substr(0, static_cast<size_t>(classify_line(p, 0, static_cast<int64_t>(p.size())).last_text))
                        : (!p.empty() && p.back() == '\r' ? p.substr(0, p.size() - 1) : p));
    has_pending = false;
  };
  std::string text;
  while (lines.next(line, offset)) {
    if (callbacks.progress && source->consumed() >= next_progress) {
      callbacks.progress(source->consumed());
      next_progress = source->consumed() + (int64_t{4} << 20);
    }
    if (offset == 0 && line.substr(0, 3) == "\xEF\xBB\xBF") {  // byte-order mark
      line.remove_prefix(3);
      offset = 3;
    }
    if (options.json_lines) {
      // A record is a JSON object (blank lines between records are skipped); the parser
      // checks its UTF-8 (bytes outside strings must be ASCII in JSON).
      const size_t first = line.find_first_not_of(" \t\r\f\v");
      if (first == std::string_view::npos) continue;
      const auto c = static_cast<unsigned char>(line[first]);  // usually '{': no need to look further
      if ((c <= 0x20 || c == 0x7F || c == 0xC2) &&
          classify_line(line, static_cast<int64_t>(first), static_cast<int64_t>(line.size())).blank)
        continue;
      ++documents;
      if (!callbacks.begin(offset)) continue;  // another rank's record: that rank parses it
      std::string error;
      TUPE_CHECK(json_record_text(line, options.text_field, text, error),
                 path << ": line " << lines.line_number() << ": " << error);
      for_each_text_line(text, callbacks.line);
      continue;
    }
    // A blank line holds only bytes below 0x21, DEL and C1 pairs: valid UTF-8 by itself. The
    // lines of a document are checked only when it is wanted.
    const LineInfo info = classify_line(line, 0, static_cast<int64_t>(line.size()));
    if (info.blank) {
      flush_pending(true);
      in_doc = false;
      continue;
    }
    if (options.documents == DocumentBoundary::kLine || !in_doc) {
      flush_pending(false);
      ++documents;
      wanted = callbacks.begin(offset);
      in_doc = options.documents == DocumentBoundary::kBlankLine;
    }
    if (!wanted) continue;
    try {
      check_utf8(path, line, offset);
    } catch (const Error& e) {
      const std::string msg = e.what();
      TUPE_FAIL(path << ": line " << lines.line_number() << msg.substr(path.size()));
    }
    if (options.documents == DocumentBoundary::kLine) {
      callbacks.line(line.substr(0, static_cast<size_t>(info.last_text)));
      continue;
    }
    flush_pending(false);
    const std::string_view middle = !line.empty() && line.back() == '\r' ? line.substr(0, line.size() - 1) : line;
    if (static_cast<int64_t>(middle.size()) == info.last_text) {
      callbacks.line(middle);  // both cuts agree
    } else {
      pending.assign(line);
      has_pending = true;
    }
  }
  flush_pending(true);
  if (callbacks.progress) callbacks.progress(source->consumed());
  TUPE_CHECK(documents > 0, path << ": no text (" << (options.json_lines ? "no JSON record" : "only blank lines, spaces or control characters")
                                 << (file.compression != Compression::kNone ? " after decompression" : "") << ")");
  return lines.end_offset();
}

int64_t line_number_at(const std::string& path, int64_t offset) {
  InFile in(path);
  std::vector<char> buf(kChunk);
  int64_t line = 1, at = 0;
  while (at < offset) {
    const size_t got = in.read(buf.data(), static_cast<size_t>(std::min<int64_t>(offset - at, static_cast<int64_t>(buf.size()))));
    if (got == 0) break;
    line += std::count(buf.data(), buf.data() + got, '\n');
    at += static_cast<int64_t>(got);
  }
  return line;
}

}  // namespace tupe::data_pipeline
