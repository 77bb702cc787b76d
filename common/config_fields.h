// Table-driven configuration structs.
//
// Each config struct (ModelConfig, ...) lists its fields once in a FieldTable: name, unit
// and meaning (for --help), and a pointer to the member. From that one table come the
// --help text, the printed effective config, the key=value form stored in checkpoints
// and shard attributes, and parsing from INI/command-line strings. Unknown keys and
// unparsable values are errors naming the key.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "common/error.h"

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
/// lists every value once; its order is the order of the words in errors.
template <class E>
struct Choice {
  const char* word;  ///< the text in configs and on the command line
  E value;           ///< the enum value it parses to
};

/// The words joined for an error message: "a", "a or b", "a, b or c".
std::string choice_words(const std::vector<std::string>& words);

/// The value whose word is `text`; throws tupe::Error "<what>: expected a, b or c, got '<text>'"
/// (`what` names the key or option, printed as given, e.g. "finetune.select_epoch").
template <class E, std::size_t N>
E parse_choice(const std::string& what, const std::string& text, const Choice<E> (&choices)[N]) {
  std::vector<std::string> words;
  for (const auto& c : choices) {
    if (text == c.word) return c.value;
    words.emplace_back(c.word);
  }
  TUPE_FAIL(what << ": expected " << choice_words(words) << ", got '" << text << "'");
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

/// One field of a config struct S.
template <class S>
struct Field {
  std::string name;  ///< key, e.g. "hidden_size"
  std::string help;  ///< meaning with unit, e.g. "model width d (elements)"
  std::function<std::string(const S&)> get;
  std::function<void(S&, const std::string&)> set;  ///< throws tupe::Error on bad text
  PathField path = PathField::kNone;                ///< names files (see rebase_paths)
};

template <class S>
class FieldTable {
 public:
  FieldTable& integer(const std::string& name, int64_t S::*m, std::string help) {
    fields_.push_back({name, std::move(help), [m](const S& s) { return std::to_string(s.*m); },
                       [m, name](S& s, const std::string& t) { s.*m = parse_int(name, t); }});
    return *this;
  }
  FieldTable& real(const std::string& name, double S::*m, std::string help) {
    fields_.push_back({name, std::move(help), [m](const S& s) { return format_double(s.*m); },
                       [m, name](S& s, const std::string& t) { s.*m = parse_double(name, t); }});
    return *this;
  }
  FieldTable& boolean(const std::string& name, bool S::*m, std::string help) {
    fields_.push_back({name, std::move(help), [m](const S& s) { return std::string(s.*m ? "true" : "false"); },
                       [m, name](S& s, const std::string& t) { s.*m = parse_bool(name, t); }});
    return *this;
  }
  FieldTable& text(const std::string& name, std::string S::*m, std::string help) {
    fields_.push_back({name, std::move(help), [m](const S& s) { return s.*m; },
                       [m](S& s, const std::string& t) { s.*m = t; }});
    return *this;
  }
  /// A text field naming one file or folder (resolved against the config file's folder).
  FieldTable& path(const std::string& name, std::string S::*m, std::string help) {
    text(name, m, std::move(help));
    fields_.back().path = PathField::kOne;
    return *this;
  }
  /// A text field naming comma-separated files or folders (each resolved like path()).
  FieldTable& path_list(const std::string& name, std::string S::*m, std::string help) {
    text(name, m, std::move(help));
    fields_.back().path = PathField::kList;
    return *this;
  }
  /// An enum field: prints the word of its value and parses a word of `choices` (copied),
  /// else throws tupe::Error "key '<name>': expected a, b or c, got '<text>'".
  template <class E, std::size_t N>
  FieldTable& choice(const std::string& name, E S::*m, const Choice<E> (&choices)[N], std::string help) {
    fields_.push_back(
        {name, std::move(help), [m, choices](const S& s) { return choice_word(s.*m, choices); },
         [m, choices, name](S& s, const std::string& t) { s.*m = parse_choice("key '" + name + "'", t, choices); }});
    return *this;
  }
  /// A field with custom conversion (enums): `get` prints, `set` parses (throwing on bad text).
  FieldTable& custom(const std::string& name, std::string help, std::function<std::string(const S&)> get,
                     std::function<void(S&, const std::string&)> set) {
    fields_.push_back({name, std::move(help), std::move(get), std::move(set)});
    return *this;
  }

  const std::vector<Field<S>>& fields() const { return fields_; }

  /// All fields as key -> value text.
  KeyValues to_kv(const S& s) const {
    KeyValues kv;
    for (const auto& f : fields_) kv[f.name] = f.get(s);
    return kv;
  }
  /// Applies key -> value text onto `s`; throws tupe::Error for an unknown key
  /// (`where` names the source, e.g. "configs/tiny.ini [model]").
  void apply(S& s, const KeyValues& kv, const std::string& where) const {
    for (const auto& [key, value] : kv) {
      const Field<S>* f = find(key);
      TUPE_CHECK(f != nullptr, where << ": unknown key '" << key << "'");
      try {
        f->set(s, value);
      } catch (const Error& e) {
        TUPE_FAIL(where << ": " << e.what());
      }
    }
  }
  /// `kv` (read from a config file in folder `base`) with its path fields' relative values
  /// resolved against `base`; unknown keys are left for apply() to name.
  KeyValues rebase_paths(const KeyValues& kv, const std::string& base) const {
    KeyValues out = kv;
    for (auto& [key, value] : out)
      if (const Field<S>* f = find(key)) value = rebase_path_value(value, f->path, base);
    return out;
  }
  const Field<S>* find(const std::string& key) const {
    for (const auto& f : fields_)
      if (f.name == key) return &f;
    return nullptr;
  }

 private:
  std::vector<Field<S>> fields_;
};


}  // namespace tupe
