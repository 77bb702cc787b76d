// Table-driven configuration structs: each field of a config struct is described ONCE, in
// one entry of the struct's FieldTable:
//
//   t.integer("max_steps", &TrainOptions::max_steps, 0, "steps",
//             "stop after this optimizer step; 0 = optimizer.total_steps")
//       .at_least(0)
//
// names the key, the member, the default, the unit, the meaning and the allowed range. From
// that one entry come the struct's default (its constructor calls reset()), the --help text,
// parsing from INI and command-line strings, the printed effective config, the key=value form
// saved in checkpoints and shard attributes, and the range check (check()). A struct's
// validate() adds only what involves several fields. Unknown keys, unparsable values and
// values out of range are errors naming the key. docs/config.md lists every table.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/nearest.h"

namespace tupe {

/// Ordered key -> value strings (INI "section.key" or a struct's own field names).
using KeyValues = std::map<std::string, std::string>;

/// Parses a value of a field; throws tupe::Error naming `key` on bad text.
int64_t parse_int(const std::string& key, const std::string& text);
double parse_double(const std::string& key, const std::string& text);
bool parse_bool(const std::string& key, const std::string& text);
/// Formats a double with the shortest text that parses back to the same value.
std::string format_double(double v);

/// Splits "a, b ,,c" at commas into {"a", "b", "c"}: items trimmed of spaces and tabs,
/// empty items dropped (the lists of config values: paths, learning rates, labels).
std::vector<std::string> split_comma_list(const std::string& text);

/// One word of a choice field and the enum value it stands for. A choice table, e.g.
///   constexpr Choice<SelectEpoch> kSelectEpochWords[] = {{"best", SelectEpoch::kBest}, {"last", SelectEpoch::kLast}};
/// lists every value; its order is the order of the words in errors and help. A value may
/// have several words (e.g. "true" and "on"): the first is the one printed, and only the first
/// word of each value is listed in errors and help.
template <class E>
struct Choice {
  const char* word;  ///< the text in configs and on the command line
  E value;           ///< the enum value it parses to
};

/// The words joined for an error message: "a", "a or b", "a, b or c".
std::string choice_words(const std::vector<std::string>& words);

/// The first word of each value of `choices`, in table order.
template <class E, std::size_t N>
std::vector<std::string> primary_words(const Choice<E> (&choices)[N]) {
  std::vector<std::string> words;
  for (std::size_t i = 0; i < N; ++i) {
    bool seen = false;
    for (std::size_t j = 0; j < i; ++j) seen = seen || choices[j].value == choices[i].value;
    if (!seen) words.emplace_back(choices[i].word);
  }
  return words;
}

/// The value whose word is `text`; throws tupe::Error "<what>: expected a, b or c, got '<text>'"
/// (`what` names the key or option, printed as given, e.g. "finetune.select_epoch").
template <class E, std::size_t N>
E parse_choice(const std::string& what, const std::string& text, const Choice<E> (&choices)[N]) {
  for (const auto& c : choices)
    if (text == c.word) return c.value;
  TUPE_FAIL(what << ": expected " << choice_words(primary_words(choices)) << ", got '" << text << "'");
}

/// The word of `value` in `choices`; throws tupe::Error when the table lacks it (a bug).
template <class E, std::size_t N>
std::string choice_word(E value, const Choice<E> (&choices)[N]) {
  for (const auto& c : choices)
    if (c.value == value) return c.word;
  TUPE_FAIL("choice table has no word for enum value " << static_cast<long long>(value));
}

/// Whether a field names files: a relative path read from a config file is resolved against
/// that file's folder (a path given on the command line, against the working directory).
enum class PathField {
  kNone,  ///< not a path
  kOne,   ///< one path ("" = none)
  kList,  ///< comma-separated paths
};

/// `value` with each relative path of kind `kind` made relative to `base` (the config file's
/// folder; lexically normalised). Absolute paths, "" and kNone values are returned as they are.
std::string rebase_path_value(const std::string& value, PathField kind, const std::string& base);

/// One end of a numeric field's range.
struct Bound {
  double value = 0;
  bool inclusive = true;
};

/// The range of a numeric field in words: "positive", ">= 0", "> 1", "<= 256", "[0, 1)",
/// "(0, 1)"; "" without bounds.
std::string range_text(const std::optional<Bound>& lo, const std::optional<Bound>& hi);

/// One field of a config struct S: everything the program knows about it.
template <class S>
struct Field {
  std::string name;          ///< key, e.g. "hidden_size"
  std::string type;          ///< integer, real, boolean, text, path, path list or choice (the reference's "type")
  std::string help;          ///< meaning, e.g. "model width d"
  std::string unit;          ///< e.g. "elements", "steps", "seconds"; "" = none (counts, flags, words)
  std::string default_text;  ///< the default as the config text
  std::function<std::string(const S&)> get;
  std::function<void(S&, const std::string&)> set;  ///< parses; throws tupe::Error on bad text
  std::function<void(S&)> reset;                    ///< sets the default
  PathField path = PathField::kNone;                ///< names files (see rebase_paths)
  std::vector<std::string> words;                   ///< a choice field's words, else empty
  std::function<double(const S&)> number;           ///< a numeric field's value (for the range)
  std::optional<Bound> lo, hi;                      ///< a numeric field's range
  bool zero_too = false;                            ///< 0 is allowed besides the range (0 = off / derive)
  bool not_empty = false;                           ///< a text field that must hold something

  /// The allowed values in words ("" = anything that parses): the range of a numeric field,
  /// "a | b | c" for a choice, "not empty".
  std::string allowed() const {
    if (!words.empty()) {
      std::string out;
      for (const auto& w : words) out += (out.empty() ? "" : " | ") + w;
      return out;
    }
    if (not_empty) return "not empty";
    const std::string r = range_text(lo, hi);
    return zero_too && !r.empty() ? "0 or " + r : r;
  }
  /// The help line: "meaning (unit; allowed)", parts left out when empty.
  std::string describe() const {
    std::string extra = unit;
    const std::string a = allowed();
    if (!a.empty()) extra += (extra.empty() ? "" : "; ") + a;
    return extra.empty() ? help : help + " (" + extra + ")";
  }
  /// "" when `s` holds an allowed value, else "must be <allowed>, got <value>".
  std::string violation(const S& s) const {
    if (not_empty) return get(s).empty() ? "must not be empty" : "";
    if (!number) return "";
    const double v = number(s);
    const bool ok = (zero_too && v == 0) || ((!lo || (lo->inclusive ? v >= lo->value : v > lo->value)) &&
                                             (!hi || (hi->inclusive ? v <= hi->value : v < hi->value)));
    if (ok) return "";
    const std::string r = range_text(lo, hi);
    const std::string a = r.front() == '[' || r.front() == '(' ? "in " + r : r;
    return "must be " + (zero_too ? "0 or " + a : a) + ", got " + get(s);
  }
};

template <class S>
class FieldTable {
 public:
  /// `section`: the INI section the struct is read from, named in range errors ("train").
  explicit FieldTable(std::string section) : section_(std::move(section)) {}

  FieldTable& integer(const std::string& name, int64_t S::*m, int64_t def, std::string unit, std::string help) {
    add(name, "integer", std::move(help), std::move(unit), std::to_string(def), [m](const S& s) { return std::to_string(s.*m); },
        [m, name](S& s, const std::string& t) { s.*m = parse_int(name, t); }, [m, def](S& s) { s.*m = def; });
    fields_.back().number = [m](const S& s) { return static_cast<double>(s.*m); };
    return *this;
  }
  FieldTable& real(const std::string& name, double S::*m, double def, std::string unit, std::string help) {
    add(name, "real", std::move(help), std::move(unit), format_double(def), [m](const S& s) { return format_double(s.*m); },
        [m, name](S& s, const std::string& t) { s.*m = parse_double(name, t); }, [m, def](S& s) { s.*m = def; });
    fields_.back().number = [m](const S& s) { return s.*m; };
    return *this;
  }
  FieldTable& boolean(const std::string& name, bool S::*m, bool def, std::string help) {
    add(name, "boolean", std::move(help), "", def ? "true" : "false", [m](const S& s) { return std::string(s.*m ? "true" : "false"); },
        [m, name](S& s, const std::string& t) { s.*m = parse_bool(name, t); }, [m, def](S& s) { s.*m = def; });
    return *this;
  }
  FieldTable& text(const std::string& name, std::string S::*m, std::string def, std::string help) {
    add(name, "text", std::move(help), "", def, [m](const S& s) { return s.*m; }, [m](S& s, const std::string& t) { s.*m = t; },
        [m, def](S& s) { s.*m = def; });
    return *this;
  }
  /// A text field naming one file or folder (resolved against the config file's folder).
  FieldTable& path(const std::string& name, std::string S::*m, std::string def, std::string help) {
    text(name, m, std::move(def), std::move(help));
    fields_.back().path = PathField::kOne;
    fields_.back().type = "path";
    return *this;
  }
  /// A text field naming comma-separated files or folders (each resolved like path()).
  FieldTable& path_list(const std::string& name, std::string S::*m, std::string def, std::string help) {
    text(name, m, std::move(def), std::move(help));
    fields_.back().path = PathField::kList;
    fields_.back().type = "path list";
    return *this;
  }
  /// An enum field: prints the word of its value and parses a word of `choices` (copied),
  /// else throws tupe::Error "key '<name>': expected a, b or c, got '<text>'".
  template <class E, std::size_t N>
  FieldTable& choice(const std::string& name, E S::*m, const Choice<E> (&choices)[N], E def, std::string help) {
    add(name, "choice", std::move(help), "", choice_word(def, choices),
        [m, choices](const S& s) { return choice_word(s.*m, choices); },
        [m, choices, name](S& s, const std::string& t) { s.*m = parse_choice("key '" + name + "'", t, choices); },
        [m, def](S& s) { s.*m = def; });
    fields_.back().words = primary_words(choices);
    return *this;
  }

  // Range of the field added last (a numeric field; not_empty: a text field). Combine a
  // lower and an upper end: .at_least(0).below(1) is [0, 1).
  FieldTable& at_least(double v) { return lower({v, true}); }
  FieldTable& above(double v) { return lower({v, false}); }
  FieldTable& positive() { return above(0); }
  FieldTable& at_most(double v) { return upper({v, true}); }
  FieldTable& below(double v) { return upper({v, false}); }
  /// 0 is allowed too (the "0 = off / derive / all" of many fields): .at_least(3).or_zero().
  FieldTable& or_zero() {
    TUPE_CHECK(!fields_.empty() && fields_.back().number, section_ << ": or_zero() applies to a numeric field");
    fields_.back().zero_too = true;
    return *this;
  }
  FieldTable& not_empty() {
    TUPE_CHECK(!fields_.empty() && !fields_.back().number && fields_.back().words.empty(),
               section_ << ": not_empty() applies to a text field");
    fields_.back().not_empty = true;
    return *this;
  }

  const std::string& section() const { return section_; }
  const std::vector<Field<S>>& fields() const { return fields_; }

  /// Sets every field of `s` to its default (what the struct's constructor calls).
  void reset(S& s) const {
    for (const auto& f : fields_) f.reset(s);
  }
  /// Throws tupe::Error "<section>.<key>: must be ..., got <value>" for the first field of `s`
  /// outside its range.
  void check(const S& s) const {
    for (const auto& f : fields_) {
      const std::string why = f.violation(s);
      TUPE_CHECK(why.empty(), section_ << "." << f.name << ": " << why);
    }
  }
  /// All fields as key -> value text.
  KeyValues to_kv(const S& s) const {
    KeyValues kv;
    for (const auto& f : fields_) kv[f.name] = f.get(s);
    return kv;
  }
  /// Every field's default as key -> value text.
  KeyValues defaults() const {
    KeyValues kv;
    for (const auto& f : fields_) kv[f.name] = f.default_text;
    return kv;
  }
  /// Applies key -> value text onto `s`; throws tupe::Error for an unknown key
  /// (`where` names the source, e.g. "configs/tiny.ini [model]"), naming the nearest keys
  /// ("unknown key 'max_stpes' (did you mean train.max_steps?)").
  void apply(S& s, const KeyValues& kv, const std::string& where) const {
    for (const auto& [key, value] : kv) {
      const Field<S>* f = find(key);
      if (f == nullptr) {
        const auto gone = removed_.find(key);
        if (gone != removed_.end()) TUPE_FAIL(where << ": key '" << key << "' " << gone->second);
        TUPE_FAIL(where << ": unknown key '" << key << "'" << did_you_mean(key, names(), section_ + "."));
      }
      try {
        f->set(s, value);
      } catch (const Error& e) {
        TUPE_FAIL(where << ": " << e.what());
      }
    }
  }
  /// A key that is no longer read: apply() refuses it with "key '<name>' <why>" (one line
  /// saying what replaced it), where an unknown key would only be called unknown.
  FieldTable& removed(const std::string& name, std::string why) {
    removed_[name] = std::move(why);
    return *this;
  }
  /// The removed keys and why (the CLI accepts them as options, to refuse them in words).
  const std::map<std::string, std::string>& removed_keys() const { return removed_; }
  /// `kv` (read from a config file in folder `base`) with its path fields' relative values
  /// resolved against `base`; unknown keys are left for apply() to name.
  KeyValues rebase_paths(const KeyValues& kv, const std::string& base) const {
    KeyValues out = kv;
    for (auto& [key, value] : out)
      if (const Field<S>* f = find(key)) value = rebase_path_value(value, f->path, base);
    return out;
  }
  /// Every field's key, in table order.
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& f : fields_) out.push_back(f.name);
    return out;
  }
  const Field<S>* find(const std::string& key) const {
    for (const auto& f : fields_)
      if (f.name == key) return &f;
    return nullptr;
  }

 private:
  void add(const std::string& name, const char* type, std::string help, std::string unit, std::string default_text,
           std::function<std::string(const S&)> get, std::function<void(S&, const std::string&)> set,
           std::function<void(S&)> reset) {
    TUPE_CHECK(find(name) == nullptr, section_ << ": field '" << name << "' listed twice");
    Field<S> f;
    f.name = name;
    f.type = type;
    f.help = std::move(help);
    f.unit = std::move(unit);
    f.default_text = std::move(default_text);
    f.get = std::move(get);
    f.set = std::move(set);
    f.reset = std::move(reset);
    fields_.push_back(std::move(f));
  }
  FieldTable& lower(Bound b) {
    TUPE_CHECK(!fields_.empty() && fields_.back().number, section_ << ": a range applies to a numeric field");
    fields_.back().lo = b;
    return *this;
  }
  FieldTable& upper(Bound b) {
    TUPE_CHECK(!fields_.empty() && fields_.back().number, section_ << ": a range applies to a numeric field");
    fields_.back().hi = b;
    return *this;
  }

  std::string section_;
  std::vector<Field<S>> fields_;
  std::map<std::string, std::string> removed_;
};

}  // namespace tupe
