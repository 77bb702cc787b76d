#include "common/config_fields.h"

#include "common/number_syntax.h"

#include <filesystem>

#include <charconv>
#include <cmath>
#include <cstdio>

namespace tupe {

int64_t parse_int(const std::string& key, const std::string& text) {
  int64_t v = 0;
  // Accept 1e6-style and 1_000_000-style integers too: configs are written by people.
  std::string t;
  for (char c : text)
    if (c != '_') t.push_back(c);
  auto [ptr, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (ec == std::errc() && ptr == t.data() + t.size() && !t.empty()) return v;
  double d = 0;
  auto [p2, e2] = std::from_chars(t.data(), t.data() + t.size(), d);
  TUPE_CHECK(e2 == std::errc() && p2 == t.data() + t.size() && !t.empty() && std::floor(d) == d &&
                 std::fabs(d) < 9.0e18,
             "key '" << key << "': expected an integer, got '" << text << "'");
  return static_cast<int64_t>(d);
}

double parse_double(const std::string& key, const std::string& text) {
  const std::optional<double> v = parse_finite_number(text);  // Python's float(), finite
  TUPE_CHECK(v.has_value(), "key '" << key << "': expected a finite number, got '" << text << "'");
  return *v;
}

bool parse_bool(const std::string& key, const std::string& text) {
  if (text == "true" || text == "1" || text == "yes" || text == "on") return true;
  if (text == "false" || text == "0" || text == "no" || text == "off") return false;
  TUPE_FAIL("key '" << key << "': expected true/false, got '" << text << "'");
}

std::string choice_words(const std::vector<std::string>& words) {
  std::string out;
  for (size_t i = 0; i < words.size(); ++i) {
    if (i > 0) out += i + 1 == words.size() ? " or " : ", ";
    out += words[i];
  }
  return out;
}

std::string range_text(const std::optional<Bound>& lo, const std::optional<Bound>& hi) {
  if (lo && !hi) {
    if (lo->value == 0 && !lo->inclusive) return "positive";
    return std::string(lo->inclusive ? ">= " : "> ") + format_double(lo->value);
  }
  if (hi && !lo) return std::string(hi->inclusive ? "<= " : "< ") + format_double(hi->value);
  if (!lo && !hi) return "";
  return std::string(lo->inclusive ? "[" : "(") + format_double(lo->value) + ", " + format_double(hi->value) +
         (hi->inclusive ? "]" : ")");
}

std::string format_double(double v) {
  char buf[64];
  auto [ptr, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  return std::string(buf, ptr);
}

std::vector<std::string> split_comma_list(const std::string& text) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    if (comma == std::string::npos) comma = text.size();
    const std::string item = text.substr(pos, comma - pos);
    const size_t b = item.find_first_not_of(" \t"), e = item.find_last_not_of(" \t");
    if (b != std::string::npos) out.push_back(item.substr(b, e - b + 1));
    pos = comma + 1;
  }
  return out;
}

std::string rebase_path_value(const std::string& value, PathField kind, const std::string& base) {
  if (kind == PathField::kNone || base.empty()) return value;
  auto one = [&](const std::string& p) {
    if (p.empty() || std::filesystem::path(p).is_absolute()) return p;
    return (std::filesystem::path(base) / p).lexically_normal().string();
  };
  if (kind == PathField::kOne) return one(value);
  std::string out;
  for (const std::string& item : split_comma_list(value)) {
    if (!out.empty()) out += ',';
    out += one(item);
  }
  return out;
}

}  // namespace tupe
