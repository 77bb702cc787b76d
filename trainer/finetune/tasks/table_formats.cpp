#include "trainer/finetune/tasks/table_formats.h"

#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "common/error.h"

namespace tupe::finetune {

namespace {

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  TUPE_CHECK(in.good(), path << ": cannot open for reading");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  TUPE_CHECK(!in.bad(), path << ": read error");
  return text;
}

size_t skip_bom(const std::string& text) { return text.compare(0, 3, "\xEF\xBB\xBF") == 0 ? 3 : 0; }

}  // namespace

std::string to_string(TableFormat f) { return choice_word(f, kTableFormatWords); }

TableFormat parse_table_format(const std::string& key, const std::string& text) {
  return parse_choice(key, text, kTableFormatWords);
}

namespace {

/// The quoted CSV field starting at text[pos] == '"' (RFC 4180: "" is a quote; the field may
/// span lines); moves `pos` past its closing quote and `line` past its line ends.
std::string read_quoted_field(const std::string& text, size_t& pos, int64_t& line, const std::string& path) {
  std::string field;
  const int64_t opened = line;
  ++pos;
  while (true) {
    TUPE_CHECK(pos < text.size(), path << ":" << opened << ": a quoted field opened on this line is never closed");
    const char c = text[pos++];
    TUPE_CHECK(c != '\0', path << ":" << line << ": NUL byte");
    if (c == '"') {
      if (pos < text.size() && text[pos] == '"') {
        field += '"';
        ++pos;
        continue;
      }
      break;
    }
    if (c == '\n') ++line;
    field += c;
  }
  const bool end_ok = pos == text.size() || text[pos] == ',' || text[pos] == '\n' ||
                      (text[pos] == '\r' && pos + 1 < text.size() && text[pos + 1] == '\n') ||
                      (text[pos] == '\r' && pos + 1 == text.size());
  TUPE_CHECK(end_ok, path << ":" << line << ": '" << text[pos]
                          << "' after a closing quote (a quoted field ends with '\"' followed by ',' or the line end; "
                             "write a quote inside as \"\")");
  return field;
}

/// The unquoted CSV field at text[pos]: up to ',' or the record's end; moves `pos` there.
std::string read_plain_field(const std::string& text, size_t& pos, int64_t line, const std::string& path) {
  std::string field;
  while (pos < text.size() && text[pos] != ',' && text[pos] != '\n' &&
         !(text[pos] == '\r' && (pos + 1 == text.size() || text[pos + 1] == '\n'))) {
    TUPE_CHECK(text[pos] != '\0', path << ":" << line << ": NUL byte");
    field += text[pos++];
  }
  return field;
}

}  // namespace

TsvTable parse_csv(const std::string& text, const std::string& path) {
  TsvTable table;
  table.path = path;
  size_t pos = skip_bom(text);
  int64_t line = 1;
  bool first = true;
  while (pos < text.size()) {
    TsvRow row;
    row.line = line;
    bool done = false;
    while (!done) {
      std::string field = pos < text.size() && text[pos] == '"' ? read_quoted_field(text, pos, line, path)
                                                                : read_plain_field(text, pos, line, path);
      row.fields.push_back(std::move(field));
      if (pos < text.size() && text[pos] == ',') {
        ++pos;
        continue;
      }
      if (pos < text.size() && text[pos] == '\r') ++pos;
      if (pos < text.size() && text[pos] == '\n') ++pos;
      ++line;
      done = true;
    }
    if (first) {
      table.header = std::move(row.fields);
      first = false;
    } else {
      table.rows.push_back(std::move(row));
    }
  }
  TUPE_CHECK(!first, path << ": empty file (expected a header line)");
  return table;
}

TsvTable read_csv(const std::string& path) { return parse_csv(read_all(path), path); }

TsvTable parse_jsonl(const std::string& text, const std::string& path, const std::vector<std::string>& keys) {
  TsvTable table;
  table.path = path;
  table.header = keys;
  size_t pos = skip_bom(text);
  int64_t line = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string content = text.substr(pos, end - pos);
    pos = end + 1;
    ++line;
    if (!content.empty() && content.back() == '\r') content.pop_back();
    TsvRow row;
    row.line = line;
    if (content.find_first_not_of(" \t") == std::string::npos) {
      row.problem = "empty line";
      table.rows.push_back(std::move(row));
      continue;
    }
    nlohmann::json doc;
    try {
      doc = nlohmann::json::parse(content);
    } catch (const nlohmann::json::exception& e) {
      row.problem = std::string("not valid JSON (") + e.what() + ")";
    }
    if (row.problem.empty() && !doc.is_object()) row.problem = "not a JSON object";
    for (const auto& key : keys) {
      if (!row.problem.empty()) break;
      const auto it = doc.find(key);
      if (it == doc.end()) {
        row.problem = "no key '" + key + "'";
      } else if (it->is_string()) {
        row.fields.push_back(it->get<std::string>());
      } else if (it->is_number() || it->is_boolean()) {
        row.fields.push_back(it->dump());
      } else {
        row.problem = "key '" + key + "' holds " + std::string(it->type_name()) + ", not a string, number or boolean";
      }
    }
    if (!row.problem.empty()) row.fields.clear();
    table.rows.push_back(std::move(row));
  }
  return table;
}

TsvTable read_jsonl(const std::string& path, const std::vector<std::string>& keys) {
  return parse_jsonl(read_all(path), path, keys);
}

TsvTable read_table(const std::string& path, TableFormat format, bool header, const std::vector<std::string>& keys) {
  switch (format) {
    case TableFormat::kTsv: return read_tsv(path, header);
    case TableFormat::kCsv: return read_csv(path);
    case TableFormat::kJsonl: return read_jsonl(path, keys);
    case TableFormat::kAuto: break;
  }
  TUPE_FAIL(path << ": unknown table format '" << to_string(format) << "' (tsv, csv, jsonl)");
}

}  // namespace tupe::finetune
