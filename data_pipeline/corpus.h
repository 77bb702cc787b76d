// Raw text corpora: listing the input files and cutting a file's bytes into documents.
// (Compressed and JSON-lines inputs: corpus_stream.h.)
//
// Document boundaries (config `documents`):
//   blank_line  BERT's create_pretraining_data format: one sentence per line, documents
//               separated by one or more blank lines (a line of only spaces, tabs or \r);
//   line        one document per line (blank lines are skipped).
// Lines end in \n or \r\n (WikiText raw has CRLF); a UTF-8 byte-order mark at the start of a
// file is skipped. Every other line is text, WikiText ` = Heading = ` lines included.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/config_fields.h"
#include "data_pipeline/columnar_source.h"

namespace tupe::data_pipeline {

/// Where one document of the raw text ends (preprocess.documents).
enum class DocumentBoundary {
  kBlankLine,  ///< documents are separated by blank lines (BERT's format)
  kLine,       ///< every line is one document
};
/// The words of DocumentBoundary in configs and shard headers.
inline constexpr Choice<DocumentBoundary> kDocumentBoundaryWords[] = {{"blank_line", DocumentBoundary::kBlankLine},
                                                                      {"line", DocumentBoundary::kLine}};
/// "blank_line" | "line"; throws tupe::Error "<key>: expected blank_line or line, got '<text>'".
DocumentBoundary parse_document_boundary(const std::string& key, const std::string& text);
/// "blank_line" | "line".
std::string to_string(DocumentBoundary b);

/// How an input file is compressed, by its first bytes (never by its name alone).
enum class Compression {
  kNone,  ///< read as it is, at any byte offset
  kGzip,  ///< gzip (RFC 1952: 1F 8B), one or more members; read in order through zlib
  kZstd,  ///< Zstandard (RFC 8878: frames 28 B5 2F FD, skippable frames); read in order through libzstd
};
/// "none" | "gzip" | "zstd".
std::string to_string(Compression c);

/// One input file of a corpus.
struct InputFile {
  std::string path;    ///< as given (or found in a given folder)
  int64_t size_bytes;  ///< file size (compressed size for a compressed file)
  Compression compression = Compression::kNone;  ///< by the file's magic bytes
  bool json_lines = false;  ///< JSON lines (one record per line) rather than plain text (set by the plan)
  Columnar columnar = Columnar::kNone;  ///< Parquet or Arrow IPC, by the file's first bytes (columnar_source.h)
};

/// Expands `inputs` (files, or folders searched recursively for regular files, hidden ones
/// skipped) into files sorted by path (each folder's files sorted among themselves, the
/// folders in the order given), each with its compression, or its columnar format, read from
/// its first bytes. A folder of `datasets`' save_to_disk gives the data files its state.json
/// lists, not its JSON files (datasets_folder_files).
/// Throws tupe::Error "<path>: <cause>" for a missing path, an empty file ("empty file"), a
/// folder without files, a file named twice, or a file that cannot be opened.
std::vector<InputFile> list_input_files(const std::vector<std::string>& inputs);

/// Reads a whole file into memory; throws tupe::Error "<path>: <cause>" on I/O failure.
std::string read_file_bytes(const std::string& path);

/// A document: bytes [begin, end) of its file (whole lines, without the final line break).
struct DocumentSpan {
  int64_t begin;  ///< byte offset of its first character
  int64_t end;    ///< byte offset one past its last non-line-break character
};

/// Documents of a file's bytes in order (pure function of the bytes). Throws tupe::Error
/// "<path>: invalid UTF-8 at byte N: <cause>" for malformed UTF-8 (N counts from the file start) and
/// "<path>: no text (only blank lines)" when the file holds no document.
std::vector<DocumentSpan> split_documents(const std::string& path, std::string_view bytes, DocumentBoundary mode);

/// One line [pos, eol) of a text (without its \n): whether it holds no text, and one past its
/// last character other than \r. Spaces and control characters (C0, DEL, and C1 =
/// U+0080..U+009F, which tokenizers drop) are no text: a line of them is blank.
struct LineInfo {
  bool blank = true;
  int64_t last_text = 0;
};
LineInfo classify_line(std::string_view bytes, int64_t pos, int64_t eol);

/// Throws "<path>: invalid UTF-8 at byte N: <cause>" (N = base + offset in `bytes`) for
/// malformed UTF-8 in `bytes`.
void check_utf8(const std::string& path, std::string_view bytes, int64_t base);

/// The documents that start in bytes [begin, end) of a file, read with memory bounded by the
/// range plus the tail of its last document (the whole file is never held).
struct PieceText {
  int64_t base = 0;                ///< file offset of bytes[0]
  std::string bytes;               ///< the bytes read from the file
  std::vector<DocumentSpan> docs;  ///< documents starting in [begin, end), offsets into `bytes`
};

/// Reads the documents of `path` (of `file_bytes` bytes) whose first byte lies in [begin, end):
/// the same documents split_documents finds in the whole file. Every line starting in
/// [begin, end), and each of those documents, is checked for UTF-8 (unless `check_utf8_text` is
/// false: JSON lines, whose parser checks it); so the pieces of a file check all its bytes
/// between them. Throws "<path>: invalid UTF-8 at byte N: <cause>" (N from the file start) or
/// "<path>: read failed ...".
PieceText read_piece(const std::string& path, int64_t file_bytes, int64_t begin, int64_t end, DocumentBoundary mode,
                     bool check_utf8_text = true);

/// Whether `path` holds a non-blank line (reads until the first one). Throws on read errors.
bool file_has_text(const std::string& path, int64_t file_bytes);

/// Calls `line(text)` for each non-blank line of `doc` in `bytes`, the line break (\n or
/// \r\n) removed.
template <class F>
void for_each_line(std::string_view bytes, DocumentSpan doc, F&& line) {
  int64_t pos = doc.begin;
  while (pos < doc.end) {
    int64_t eol = pos;
    while (eol < doc.end && bytes[static_cast<size_t>(eol)] != '\n') ++eol;
    int64_t stop = eol;
    if (stop > pos && bytes[static_cast<size_t>(stop - 1)] == '\r') --stop;
    if (stop > pos) line(bytes.substr(static_cast<size_t>(pos), static_cast<size_t>(stop - pos)));
    pos = eol + 1;
  }
}

}  // namespace tupe::data_pipeline
