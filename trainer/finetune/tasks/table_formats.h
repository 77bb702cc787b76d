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

#include "common/config_fields.h"
#include "trainer/finetune/tasks/tsv.h"

namespace tupe::finetune {

/// The format of a task file (task.format, SplitSpec::format).
enum class TableFormat {
  kAuto,   ///< by the file's extension (a config's choice; resolve_table_format picks one of the others)
  kTsv,    ///< GLUE's TSV (tsv.h)
  kCsv,    ///< CSV per RFC 4180
  kJsonl,  ///< JSON Lines
};
/// The words of TableFormat in configs, in the order errors list them.
inline constexpr Choice<TableFormat> kTableFormatWords[] = {{"auto", TableFormat::kAuto},
                                                            {"tsv", TableFormat::kTsv},
                                                            {"csv", TableFormat::kCsv},
                                                            {"jsonl", TableFormat::kJsonl}};
/// "auto" | "tsv" | "csv" | "jsonl".
std::string to_string(TableFormat f);
/// Parses a word of kTableFormatWords; throws tupe::Error "<key>: expected auto, tsv, csv or jsonl, got '<text>'".
TableFormat parse_table_format(const std::string& key, const std::string& text);

/// Parses CSV text (see above); `path` names the file in errors.
TsvTable parse_csv(const std::string& text, const std::string& path);

/// Reads a CSV file. Throws tupe::Error "<path>: ..." when unreadable or empty.
TsvTable read_csv(const std::string& path);

/// Parses JSONL text into a table of the columns `keys` (see above).
TsvTable parse_jsonl(const std::string& text, const std::string& path, const std::vector<std::string>& keys);

/// Reads a JSONL file. Throws tupe::Error "<path>: ..." when unreadable.
TsvTable read_jsonl(const std::string& path, const std::vector<std::string>& keys);

/// The table of a file in `format` (tsv, csv or jsonl; auto is refused: resolve it first);
/// `header` for TSV only, `keys` for JSONL only.
TsvTable read_table(const std::string& path, TableFormat format, bool header, const std::vector<std::string>& keys);

}  // namespace tupe::finetune
