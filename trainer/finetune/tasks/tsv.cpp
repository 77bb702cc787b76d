#include "trainer/finetune/tasks/tsv.h"

#include <fstream>
#include <iterator>
#include <sstream>

#include "common/error.h"

namespace tupe::finetune {

std::vector<std::string> split_tabs(const std::string& line) {
  std::vector<std::string> fields;
  size_t start = 0;
  while (true) {
    const size_t tab = line.find('\t', start);
    if (tab == std::string::npos) {
      fields.push_back(line.substr(start));
      return fields;
    }
    fields.push_back(line.substr(start, tab - start));
    start = tab + 1;
  }
}

TsvTable read_tsv(const std::string& path, bool has_header) {
  std::ifstream in(path, std::ios::binary);
  TUPE_CHECK(in.good(), path << ": cannot open for reading");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  TUPE_CHECK(!in.bad(), path << ": read error");
  TsvTable table;
  table.path = path;
  size_t pos = 0;
  if (text.compare(0, 3, "\xEF\xBB\xBF") == 0) pos = 3;  // UTF-8 byte-order mark
  int64_t line_number = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    TUPE_CHECK(line.find('\0') == std::string::npos, path << ":" << line_number << ": NUL byte in the line");
    if (has_header && line_number == 1) {
      table.header = split_tabs(line);
      continue;
    }
    table.rows.push_back({line_number, split_tabs(line), {}});
  }
  TUPE_CHECK(!has_header || line_number >= 1, path << ": empty file (expected a header line)");
  return table;
}

size_t column_index(const TsvTable& table, const std::string& name) {
  size_t found = table.header.size();
  for (size_t i = 0; i < table.header.size(); ++i) {
    if (table.header[i] != name) continue;
    TUPE_CHECK(found == table.header.size(), table.path << ": header names column '" << name << "' twice");
    found = i;
  }
  if (found == table.header.size()) {
    std::ostringstream cols;
    for (size_t i = 0; i < table.header.size(); ++i) cols << (i ? ", " : "") << table.header[i];
    TUPE_FAIL(table.path << ": header has no column '" << name << "' (columns: " << cols.str() << ")");
  }
  return found;
}

}  // namespace tupe::finetune
