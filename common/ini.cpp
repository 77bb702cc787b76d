#include "common/ini.h"

#include <boost/program_options/options_description.hpp>
#include <boost/program_options/parsers.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace po = boost::program_options;

namespace tupe {

KeyValues read_ini(const std::string& path) {
  std::error_code ec;
  TUPE_CHECK(!std::filesystem::is_directory(path, ec), path << ": is a folder, not a config file");
  // Not a FIFO or device: opening a FIFO blocks until a writer comes (a hang).
  TUPE_CHECK(!std::filesystem::exists(path, ec) || std::filesystem::is_regular_file(path, ec),
             path << ": not a regular file (a pipe or device), not a config file");
  std::ifstream file(path, std::ios::binary);
  TUPE_CHECK(file.good(), path << ": cannot open config file");
  std::ostringstream bytes;
  bytes << file.rdbuf();
  std::string text = bytes.str();
  if (text.compare(0, 3, "\xEF\xBB\xBF") == 0) text.erase(0, 3);  // a UTF-8 byte-order mark (Windows editors)
  const size_t nul = text.find('\0');
  TUPE_CHECK(nul == std::string::npos, path << ": byte " << nul << " is NUL: not a text config file");
  // ';' comment lines, as ini.h promises (Boost's parser knows only '#').
  for (size_t at = 0; at < text.size();) {
    const size_t first = text.find_first_not_of(" \t", at);
    if (first != std::string::npos && text[first] == ';') text[first] = '#';
    const size_t eol = text.find('\n', at);
    at = eol == std::string::npos ? text.size() : eol + 1;
  }
  std::istringstream in(text);
  po::options_description none;
  po::parsed_options parsed(&none);
  try {
    parsed = po::parse_config_file(in, none, /*allow_unregistered=*/true);
  } catch (const po::invalid_config_file_syntax& e) {
    // Not e.what(): Boost substitutes %tokens% in its message, and a line holding such a
    // token (e.g. "%invalid_line%") is substituted again without end (found by fuzz_ini).
    TUPE_FAIL(path << ": line '" << e.tokens() << "' is neither [section] nor key = value");
  } catch (const po::error_with_option_name& e) {
    TUPE_FAIL(path << ": bad option '" << e.get_option_name() << "'");
  } catch (const po::error& e) {
    TUPE_FAIL(path << ": " << e.what());
  }
  KeyValues kv;
  for (const auto& opt : parsed.options) {
    TUPE_CHECK(opt.string_key.find('.') != std::string::npos,
               path << ": key '" << opt.string_key << "' is outside a [section]");
    TUPE_CHECK(opt.value.size() == 1, path << ": key '" << opt.string_key << "' has no value");
    TUPE_CHECK(!kv.count(opt.string_key), path << ": key '" << opt.string_key << "' given twice");
    kv[opt.string_key] = opt.value[0];
  }
  return kv;
}

KeyValues ini_section(const KeyValues& kv, const std::string& section) {
  KeyValues out;
  const std::string prefix = section + ".";
  for (const auto& [k, v] : kv)
    if (k.rfind(prefix, 0) == 0) out[k.substr(prefix.size())] = v;
  return out;
}

std::string format_ini(const KeyValues& kv) {
  std::ostringstream os;
  std::string current;
  for (const auto& [k, v] : kv) {
    const auto dot = k.find('.');
    const std::string section = dot == std::string::npos ? "" : k.substr(0, dot);
    if (section != current) {
      os << (current.empty() ? "" : "\n") << "[" << section << "]\n";
      current = section;
    }
    os << k.substr(dot + 1) << " = " << v << "\n";
  }
  return os.str();
}

}  // namespace tupe
