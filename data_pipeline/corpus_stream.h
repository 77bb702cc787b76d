// Compressed and JSON-lines corpora (README "Preprocessing: input formats"): gzip and Zstandard
// detected by their magic bytes and decompressed in order through zlib and libzstd; the text
// field of a JSON-lines record through nlohmann-json; and the documents of a whole file read
// from start to end, for the inputs that cannot be read at a byte offset (compressed files,
// preprocess.h).
//
// Documents of the two record formats:
//   text        as in corpus.h (preprocess.documents: blank_line or line);
//   JSON lines  one record per line, one document per record: its text field (a JSON string,
//               preprocess.text_field) split at \n into lines; blank lines between records are
//               skipped. A record is a JSON object; its offset is the offset of its line.
// Offsets count bytes of the decompressed text from its start; a UTF-8 byte-order mark at the
// start is skipped, as in plain files.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "common/config_fields.h"
#include "data_pipeline/corpus.h"

namespace tupe::data_pipeline {

/// Compression of `path` from its first four bytes: gzip (1F 8B), zstd (28 B5 2F FD, or a
/// skippable frame 5? 2A 4D 18), else none. Throws tupe::Error "<path>: cannot open ...".
Compression detect_compression(const std::string& path);

/// How an input's records are read (preprocess.input_format).
enum class InputFormat {
  kAuto,       ///< by name: JSON lines when the name less .gz/.gzip/.zst/.zstd ends in .jsonl, .json or .ndjson
  kText,       ///< plain text for every input
  kJsonLines,  ///< JSON lines for every input
};
inline constexpr Choice<InputFormat> kInputFormatWords[] = {
    {"auto", InputFormat::kAuto}, {"text", InputFormat::kText}, {"jsonl", InputFormat::kJsonLines}};

/// Whether `path` is read as JSON lines under `format`.
bool is_json_lines(const std::string& path, InputFormat format);

/// The decompressed bytes of one file, in order.
class ByteSource {
 public:
  virtual ~ByteSource() = default;
  /// Fills up to `n` bytes of `out`; returns how many (0 only at the end). Throws tupe::Error
  /// "<path>: truncated gzip stream ..." / "truncated zstd stream ..." when the file ends
  /// inside a member or frame, "<path>: corrupt gzip|zstd data at compressed byte N (<cause>)"
  /// for bad data (checksums included), "<path>: read failed ..." on I/O errors.
  virtual size_t read(char* out, size_t n) = 0;
  /// Bytes of the file consumed so far (compressed bytes).
  virtual int64_t consumed() const = 0;
};

/// Opens `path` for reading as `compression`. Throws tupe::Error "<path>: cannot open ...".
std::unique_ptr<ByteSource> open_byte_source(const std::string& path, Compression compression);

/// The string value of key `field` of the JSON object `record` (one JSON-lines record, UTF-8)
/// into `text`. Returns false with `error` set to the cause: "invalid JSON (<parser's
/// message>)", "not a JSON object", "no \"<field>\" field", "field \"<field>\" is a
/// <type>, not a string".
bool json_record_text(std::string_view record, const std::string& field, std::string& text, std::string& error);

/// The lines of a document's text (split at \n, one trailing \r removed, empty lines skipped),
/// as for_each_line gives them for a document of a plain file.
template <class F>
void for_each_text_line(std::string_view text, F&& line) {
  for_each_line(text, DocumentSpan{0, static_cast<int64_t>(text.size())}, std::forward<F>(line));
}

/// How stream_documents reads a file.
struct StreamOptions {
  bool json_lines = false;                                ///< JSON lines, else plain text
  std::string text_field = "text";                        ///< JSON lines: the key of the text
  DocumentBoundary documents = DocumentBoundary::kBlankLine;  ///< plain text: document boundaries
};

/// What stream_documents calls, in order: begin(offset) at each document's start (offset of
/// its first byte in the decompressed text), which returns whether the document is wanted;
/// for a wanted one line(text) for each of its lines (the same lines for_each_line gives for
/// the document of a plain file); progress(consumed) now and then with the file bytes
/// consumed so far. A document not wanted is neither parsed (JSON) nor checked (UTF-8): the
/// caller that wants it checks it.
struct DocumentCallbacks {
  std::function<bool(int64_t offset)> begin;
  std::function<void(std::string_view line)> line;
  std::function<void(int64_t consumed)> progress;
};

/// Reads every document of `file` from its start: the documents split_documents finds in
/// the decompressed bytes (plain text), or the records' texts (JSON lines). Returns the
/// length of the decompressed text in bytes. Holds one line at a time (plus read buffers).
/// Throws tupe::Error "<path>: line L: invalid UTF-8 at byte N: <cause>", "<path>: line L:
/// <json_record_text's cause>", "<path>: no text (...)" and ByteSource's errors.
int64_t stream_documents(const InputFile& file, const StreamOptions& options, const DocumentCallbacks& callbacks);

/// 1 + the number of \n in bytes [0, offset) of a plain file: the line number of a record
/// found at `offset` (error messages). Throws on read errors.
int64_t line_number_at(const std::string& path, int64_t offset);

}  // namespace tupe::data_pipeline
