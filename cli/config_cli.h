// Command-line + INI handling shared by every subcommand.
//
// A subcommand registers its config structs by section (ModelOptions under "model", ...);
// every field becomes an option `--section.field VALUE` whose help names its unit and
// default. `--config FILE` reads an INI file first; options given on the command line
// override it. Unknown sections or keys are errors naming the file or the option.
// Paths: a relative path in a config file (fields declared with FieldTable::path or
// path_list) is resolved against the config file's folder, so `--config configs/x.ini`
// works from any working directory; a path given on the command line is taken relative to
// the working directory, as usual for command-line arguments.
#pragma once
#include <boost/program_options/options_description.hpp>
#include <boost/program_options/variables_map.hpp>
#include <functional>
#include <iosfwd>
#include <string>
#include <vector>

#include "common/config_fields.h"

namespace tupe::cli {

/// Validates the keys and values of section `name` (one another subcommand reads) against
/// its field table, its relative paths resolved against `base` (the config file's folder);
/// returns false when no subcommand reads such a section. Only what the section says is
/// checked (keys, syntax, ranges, consistency), not what the owning subcommand requires at
/// run time (e.g. [vocab] input, which `tupe vocab` may take on its command line). Throws tupe::Error
/// "<where> (read by tupe ...): ..." for an unknown key or a bad value (config_sections.cpp).
bool check_other_section(const std::string& name, const KeyValues& kv, const std::string& where,
                         const std::string& base);
/// "model, data, ...": every section some subcommand reads.
std::string known_section_names();
/// The same as a list, in the order of docs/config-reference.md.
std::vector<std::string> known_sections();

/// Writes docs/config-reference.md: for every section some subcommand reads, which
/// subcommands read it and a Markdown table of its keys (type, unit, default, range, meaning)
/// from its field table, then its removed keys (`tupe help --config-reference`).
void write_config_reference(std::ostream& os);

/// Longest console line write_effective() returns (characters).
inline constexpr size_t kEffectiveLineMax = 160;

/// The console line of write_effective(): "# effective config: FILE (N keys, K set; --log-level
/// debug lists them)", FILE shortened in its middle ("...") so that the line has at most
/// kEffectiveLineMax characters.
std::string effective_line(const std::string& file, size_t keys, int64_t set);

class ConfigCli {
 public:
  ConfigCli(std::string command, std::string summary);

  /// Registers struct `target` (holding its defaults) under `section`; the struct must
  /// outlive parse(). Its fields become --section.field options.
  template <class S>
  void section(const std::string& name, const FieldTable<S>& table, S& target) {
    boost::program_options::options_description desc("[" + name + "] options (--config file or command line)");
    for (const auto& f : table.fields())
      add_field_option(desc, name + "." + f.name, f.describe(), f.get(target));
    for (const auto& [key, why] : table.removed_keys())  // accepted, so that apply() refuses them in words
      add_field_option(desc, name + "." + key, "(removed) " + why, "");
    config_options_.add(desc);
    for (const auto& [k, v] : table.to_kv(target)) defaults_[name + "." + k] = v;
    sections_.push_back({name, [&table, &target, name](const KeyValues& kv, const std::string& where) {
                           table.apply(target, kv, where);
                         },
                         [&table, &target]() { return table.to_kv(target); },
                         [&table](const KeyValues& kv, const std::string& base) { return table.rebase_paths(kv, base); }});
  }

  /// Options of the command itself (not config fields), e.g. --resume.
  boost::program_options::options_description& options() { return own_options_; }

  /// Parses argv (without the subcommand word). Returns false when --help was printed.
  /// Throws tupe::Error on bad options or config files.
  bool parse(int argc, char** argv);

  /// The parsed command-specific options.
  const boost::program_options::variables_map& vm() const { return vm_; }

  /// All registered sections' effective values as "section.key" -> value.
  KeyValues effective() const;

  /// Every registered field the user set: "section.key" -> where, "the command line" or the
  /// config file's path (the command line wins when both set it).
  const KeyValues& given() const { return given_; }

  /// Prints the effective config as INI text.
  void print_effective(std::ostream& os) const;

  /// Writes the effective config as INI text to `file` (its folder created; written under a
  /// temporary name and renamed), every path value (FieldTable::path, path_list) made absolute
  /// against the working directory, so that `--config FILE` runs again as it is from any
  /// folder (docs/config.md "Saved configs"), and returns the one console line that says so, at most
  /// kEffectiveLineMax characters (a long path is shortened in its middle):
  /// "# effective config: FILE (N keys, K set; --log-level debug lists them)". The K keys whose
  /// value differs from the built-in default go to log::debug, one line. Throws tupe::Error
  /// "<file>: cannot write the effective config: <cause>".
  std::string write_effective(const std::string& file) const;
  /// The same for `kv` instead of effective(): the effective config as a job resolved it
  /// (e.g. pre-training's tokenizer keys as the shards record them).
  std::string write_effective(const std::string& file, const KeyValues& kv) const;

 private:
  struct Section {
    std::string name;
    std::function<void(const KeyValues&, const std::string&)> apply;
    std::function<KeyValues()> to_kv;
    std::function<KeyValues(const KeyValues&, const std::string&)> rebase_paths;  ///< against the config's folder
  };
  /// `kv` ("section.key" -> value) with the relative values of the registered sections' path
  /// fields made absolute against the working directory (lexically normalised).
  KeyValues with_absolute_paths(const KeyValues& kv) const;
  static void add_field_option(boost::program_options::options_description& desc, const std::string& key,
                               const std::string& help, const std::string& default_text);

  std::string command_, summary_;
  boost::program_options::options_description own_options_;
  boost::program_options::options_description config_options_;
  std::vector<Section> sections_;
  KeyValues defaults_;  ///< "section.key" -> built-in default, as registered
  KeyValues given_;  ///< keys set by the file or the command line -> where
  boost::program_options::variables_map vm_;
};

}  // namespace tupe::cli
