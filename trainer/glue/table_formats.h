// CSV and JSON Lines task files (custom tasks, custom_task.h), read into the same table the
// GLUE TSV reader gives (tsv.h), so every format gets the same row checks (reader.h).
//   CSV (RFC 4180): fields separated by ',', records by CRLF or LF; a field starting with '"'
//     is quoted: '""' inside is one '"', and commas, CR and LF inside are data; after the
//     closing quote only ',' or the record end may follow. A '"' inside an unquoted field is
//     kept as data (as Python's csv reader does). The first record is the header. A UTF-8
//     byte-order mark is skipped; the last record may lack its line end. A row's line is the
//     line its record starts on.
//   JSONL: one JSON object per line (blank lines are rows too: "empty line"); the table's
//     header is the keys asked for, and a row's fields are their values: strings as they are,
//     numbers, true/false as their JSON text ("1", "4.5", "true"). A line that is not an
//     object, lacks a key, or has a null/array/object value is a bad row (TsvRow::problem).
// Syntax errors that leave the rest of the file unreadable (an unclosed quote, text after a
// closing quote, a NUL byte) are tupe::Error "<file>:<line>: <cause>".
#pragma once
#include <string>
#include <vector>

#include "trainer/glue/tsv.h"

namespace tupe::glue {

/// Parses CSV text (see above); `path` names the file in errors.
TsvTable parse_csv(const std::string& text, const std::string& path);

/// Reads a CSV file. Throws tupe::Error "<path>: ..." when unreadable or empty.
TsvTable read_csv(const std::string& path);

/// Parses JSONL text into a table of the columns `keys` (see above).
TsvTable parse_jsonl(const std::string& text, const std::string& path, const std::vector<std::string>& keys);

/// Reads a JSONL file. Throws tupe::Error "<path>: ..." when unreadable.
TsvTable read_jsonl(const std::string& path, const std::vector<std::string>& keys);

/// The table of a file in `format` ("tsv", "csv", "jsonl"); `header` for TSV only, `keys`
/// for JSONL only.
TsvTable read_table(const std::string& path, const std::string& format, bool header, const std::vector<std::string>& keys);

}  // namespace tupe::glue
