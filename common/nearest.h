// "Did you mean ...?": the valid words nearest to a misspelt one (an unknown config key,
// section, option or subcommand), by edit distance.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

namespace tupe {

/// The optimal-string-alignment distance of `a` and `b`: the fewest insertions, deletions,
/// substitutions and swaps of two neighbouring characters that turn one into the other
/// ("max_stpes" -> "max_steps": 1). Characters are bytes, compared case-sensitively.
std::size_t edit_distance(const std::string& a, const std::string& b);

/// The words of `candidates` nearest to `word`: those at the least distance, if that
/// distance is at most max(2, |word| / 3) (a word further off is no likely misspelling),
/// compared case-insensitively, at most `limit` of them in `candidates`' order, without
/// repeats. Empty when none is that near, or `word` is empty.
std::vector<std::string> nearest_words(const std::string& word, const std::vector<std::string>& candidates,
                                       std::size_t limit = 3);

/// " (did you mean a?)", " (did you mean a or b?)", each word with `prefix` in front (e.g.
/// "--"); "" when `nearest_words` finds none. For the end of a one-line error.
std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates,
                         const std::string& prefix = "");

}  // namespace tupe
