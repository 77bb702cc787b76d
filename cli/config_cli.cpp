#include "cli/config_cli.h"

#include <unistd.h>

#include <boost/program_options/parsers.hpp>
#include <boost/program_options/value_semantic.hpp>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "common/error.h"
#include "common/config_given.h"
#include "common/ini.h"
#include "common/log.h"
#include "common/nearest.h"

namespace po = boost::program_options;

namespace tupe::cli {

ConfigCli::ConfigCli(std::string command, std::string summary)
    : command_(std::move(command)), summary_(std::move(summary)), own_options_("Options") {
  own_options_.add_options()("help,h", "print this help")(
      "config", po::value<std::string>(),
      "INI file with [section] key = value lines; command-line options override it")(
      "log-level", po::value<std::string>()->value_name("L"),
      "console log level: debug, info, warn, error or off (default: $TUPE_LOG_LEVEL, else info)")(
      "log-ranks", po::value<std::string>()->value_name("R"),
      "which ranks print info lines: 0 or all, tagged [rank R] (default: $TUPE_LOG_RANKS, else 0)");
}

namespace {

/// --log-level / --log-ranks, else the environment, else the defaults (common/log.h).
void apply_log_options(const po::variables_map& vm) {
  if (vm.count("log-level"))
    log::set_level(log::parse_level(vm["log-level"].as<std::string>(), "--log-level"));
  else if (const char* v = std::getenv("TUPE_LOG_LEVEL"); v && *v)
    log::set_level(log::parse_level(v, "TUPE_LOG_LEVEL"));
  if (vm.count("log-ranks"))
    log::set_ranks(log::parse_ranks(vm["log-ranks"].as<std::string>(), "--log-ranks"));
  else if (const char* v = std::getenv("TUPE_LOG_RANKS"); v && *v)
    log::set_ranks(log::parse_ranks(v, "TUPE_LOG_RANKS"));
}

/// " (did you mean [model]?)" for "modle", else "".
std::string did_you_mean_section(const std::string& section) {
  const auto near = nearest_words(section, known_sections());
  if (near.empty()) return "";
  std::string out = " (did you mean ";
  for (size_t i = 0; i < near.size(); ++i) out += (i == 0 ? "" : i + 1 == near.size() ? " or " : ", ") + ("[" + near[i] + "]");
  return out + "?)";
}

}  // namespace

void ConfigCli::add_field_option(po::options_description& desc, const std::string& key, const std::string& help,
                                 const std::string& default_text) {
  desc.add_options()(key.c_str(), po::value<std::string>()->value_name("V"),
                     (help + " (default: " + (default_text.empty() ? "\"\"" : default_text) + ")").c_str());
}

bool ConfigCli::parse(int argc, char** argv) {
  po::options_description all;
  all.add(own_options_).add(config_options_);
  try {
    // No positional arguments: a stray word is an error, not silently dropped.
    const po::positional_options_description none;
    po::store(po::command_line_parser(argc, argv).options(all).positional(none).run(), vm_);
    po::notify(vm_);
  } catch (const po::unknown_option& e) {
    // "unrecognised option '--train.max_stpes' (did you mean --train.max_steps?; see ...)"
    std::vector<std::string> names;
    for (const auto& o : all.options()) names.push_back(o->long_name());
    std::string word = e.get_option_name();
    word.erase(0, word.find_first_not_of('-'));
    const std::string near = did_you_mean(word, names, "--");
    TUPE_FAIL(e.what() << (near.empty() ? " (" : near.substr(0, near.size() - 1) + "; ") << "see tupe " << command_
                       << " --help)");
  } catch (const po::error& e) {
    TUPE_FAIL(e.what() << " (see tupe " << command_ << " --help)");
  }
  if (vm_.count("help")) {
    std::cout << "Usage: tupe " << command_ << " [--config FILE] [--section.key VALUE ...] [options]\n"
              << summary_ << "\n\n"
              << all << "\n";
    return false;
  }
  apply_log_options(vm_);
  KeyValues file_kv;
  std::string file;
  if (vm_.count("config")) {
    file = vm_["config"].as<std::string>();
    file_kv = read_ini(file);
  }
  // Every key of the file must belong to a section some subcommand reads. Sections of other
  // subcommands (e.g. [finetune] in a pre-training file) are validated all the same.
  std::vector<std::string> others;
  for (const auto& [k, v] : file_kv) {
    const std::string sec = k.substr(0, k.find('.'));
    bool mine = false;
    for (const auto& s : sections_) mine = mine || s.name == sec;
    if (!mine && (others.empty() || others.back() != sec)) others.push_back(sec);
  }
  // Relative paths in the file are relative to the file's folder.
  const std::string base = file.empty() ? std::string() : std::filesystem::path(file).parent_path().string();
  for (const auto& sec : others)
    TUPE_CHECK(check_other_section(sec, ini_section(file_kv, sec), file + " [" + sec + "]", base),
               file << ": unknown section [" << sec << "]: no subcommand reads it"
                    << did_you_mean_section(sec) << " (sections: " << known_section_names() << ")");
  for (const auto& s : sections_) {
    const KeyValues from_file = ini_section(file_kv, s.name);
    s.apply(s.rebase_paths(from_file, base), file + " [" + s.name + "]");
    KeyValues overrides;
    for (const auto& [k, v] : vm_)
      if (k.rfind(s.name + ".", 0) == 0) overrides[k.substr(s.name.size() + 1)] = v.as<std::string>();
    s.apply(overrides, "command line --" + s.name + ".*");
    for (const auto& [k, v] : from_file) given_[s.name + "." + k] = file;
    for (const auto& [k, v] : overrides) given_[s.name + "." + k] = kGivenOnCommandLine;
  }
  return true;
}

KeyValues ConfigCli::effective() const {
  KeyValues all;
  for (const auto& s : sections_)
    for (const auto& [k, v] : s.to_kv()) all[s.name + "." + k] = v;
  return all;
}

void ConfigCli::print_effective(std::ostream& os) const { os << format_ini(effective()); }

std::string ConfigCli::write_effective(const std::string& file) const { return write_effective(file, effective()); }

std::string ConfigCli::write_effective(const std::string& file, const KeyValues& kv) const {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path path(file);
  if (path.has_parent_path()) fs::create_directories(path.parent_path(), ec);
  const fs::path temp = path.string() + ".tmp-" + std::to_string(::getpid());
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    out << "# effective config of `tupe " << command_ << "`; paths are absolute, so it runs again from any folder\n"
        << format_ini(with_absolute_paths(kv));
    out.close();
    TUPE_CHECK(out.good(), file << ": cannot write the effective config: "
                                << (ec ? ec.message() : std::string(std::strerror(errno))));
  }
  fs::rename(temp, path, ec);
  if (ec) fs::remove(temp);
  TUPE_CHECK(!ec, file << ": cannot write the effective config: " << ec.message());
  int64_t set = 0;
  std::ostringstream listed;
  for (const auto& [k, v] : kv) {
    const auto d = defaults_.find(k);
    if (d != defaults_.end() && d->second == v) continue;
    listed << (set ? ", " : "") << k << "=" << v;
    ++set;
  }
  log::debug("effective config, " + std::to_string(set) + " key(s) set" + (set ? ": " + listed.str() : std::string()));
  return effective_line(file, kv.size(), set);
}

KeyValues ConfigCli::with_absolute_paths(const KeyValues& kv) const {
  const std::string cwd = std::filesystem::current_path().string();
  KeyValues out = kv;
  for (const auto& s : sections_) {
    const std::string prefix = s.name + ".";
    KeyValues mine;
    for (const auto& [k, v] : kv)
      if (k.rfind(prefix, 0) == 0) mine[k.substr(prefix.size())] = v;
    for (const auto& [k, v] : s.rebase_paths(mine, cwd)) out[prefix + k] = v;
  }
  return out;
}

std::string effective_line(const std::string& file, size_t keys, int64_t set) {
  const std::string tail = " (" + std::to_string(keys) + " keys, " + std::to_string(set) +
                           " set; --log-level debug lists them)";
  const std::string head = "# effective config: ";
  std::string shown = file;
  const size_t room = kEffectiveLineMax - head.size() - tail.size();
  if (shown.size() > room) {  // keep the start and the file name, drop the middle
    const size_t keep_end = room / 2, keep_start = room - keep_end - 3;
    shown = file.substr(0, keep_start) + "..." + file.substr(file.size() - keep_end);
  }
  std::ostringstream line;
  line << head << shown << tail;
  return line.str();
}

}  // namespace tupe::cli
