// Tab-separated files as the GLUE distribution lays them out (docs/formats.md "GLUE task files"): fields
// split on TAB only, NO quote processing (sentences hold bare " characters), an optional
// UTF-8 BOM at the start (MRPC), LF or CRLF line ends, the last line with or without its
// line end. Line numbers count from 1 (the header, when there is one, is line 1).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace tupe::finetune {

/// One data line of a TSV file.
struct TsvRow {
  int64_t line = 0;                 ///< 1-based line number in the file
  std::vector<std::string> fields;  ///< split on TAB, verbatim (no unquoting, no trimming)
  std::string problem;              ///< "" = readable; else why the row is bad (JSONL: not an object, a key missing)
};

/// A whole TSV file.
struct TsvTable {
  std::string path;
  std::vector<std::string> header;  ///< column names (empty when read without a header)
  std::vector<TsvRow> rows;         ///< data lines in file order
};

/// Splits `line` on TAB (an empty line gives one empty field).
std::vector<std::string> split_tabs(const std::string& line);

/// Reads `path`. With `has_header` the first line gives the column names (BOM removed).
/// Throws tupe::Error "<path>: <cause>" when the file cannot be read, is empty (no header
/// line), or holds a NUL byte (line named). Rows are NOT checked here (see glue_reader.h).
TsvTable read_tsv(const std::string& path, bool has_header);

/// Index of column `name` in `table.header`; throws tupe::Error "<path>: header has no
/// column '<name>' (columns: ...)" when absent or present twice.
size_t column_index(const TsvTable& table, const std::string& name);

}  // namespace tupe::finetune
