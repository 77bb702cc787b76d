#include "common/nearest.h"

#include <algorithm>
#include <cctype>

namespace tupe {

std::size_t edit_distance(const std::string& a, const std::string& b) {
  const std::size_t n = a.size(), m = b.size();
  // d[i][j]: the distance of a[0, i) and b[0, j).
  std::vector<std::vector<std::size_t>> d(n + 1, std::vector<std::size_t>(m + 1, 0));
  for (std::size_t i = 0; i <= n; ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= m; ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= n; ++i)
    for (std::size_t j = 1; j <= m; ++j) {
      const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[n][m];
}

namespace {
std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}
}  // namespace

std::vector<std::string> nearest_words(const std::string& word, const std::vector<std::string>& candidates,
                                       std::size_t limit) {
  std::vector<std::string> out;
  if (word.empty() || limit == 0) return out;
  const std::string w = lower(word);
  const std::size_t allowed = std::max<std::size_t>(2, word.size() / 3);
  std::size_t best = allowed + 1;
  for (const auto& c : candidates) {
    const std::size_t d = edit_distance(w, lower(c));
    if (d > allowed || d > best) continue;
    if (d < best) {
      best = d;
      out.clear();
    }
    if (out.size() < limit && std::find(out.begin(), out.end(), c) == out.end()) out.push_back(c);
  }
  return out;
}

std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates,
                         const std::string& prefix) {
  const std::vector<std::string> near = nearest_words(word, candidates);
  if (near.empty()) return "";
  std::string out = " (did you mean ";
  for (std::size_t i = 0; i < near.size(); ++i) {
    if (i > 0) out += i + 1 == near.size() ? " or " : ", ";
    out += prefix + near[i];
  }
  return out + "?)";
}

}  // namespace tupe
