#include "common/number_syntax.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <string>
#include <system_error>

namespace tupe {

namespace {

/// The ASCII bytes Python's float() strips: space, \t \n \v \f \r (not 0x1c-0x1f, which
/// str.isspace() counts).
bool python_space(unsigned char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

bool digit(char c) { return c >= '0' && c <= '9'; }

/// A cursor `i` over the stripped text `s`.
struct Scanner {
  std::string_view s;
  size_t i;

  bool at(char c) const { return i < s.size() && s[i] == c; }
  /// Python's digitpart: digit (["_"] digit)*, appended to `out` without the underscores;
  /// returns the number of digits read (0: none there).
  size_t digitpart(std::string& out) {
    size_t n = 0;
    while (i < s.size()) {
      if (digit(s[i])) {
        out.push_back(s[i++]);
        ++n;
      } else if (s[i] == '_' && n > 0 && i + 1 < s.size() && digit(s[i + 1])) {
        ++i;
      } else {
        break;
      }
    }
    return n;
  }
};

bool equals_lower(std::string_view text, std::string_view word) {
  if (text.size() != word.size()) return false;
  for (size_t k = 0; k < text.size(); ++k)
    if (static_cast<char>(text[k] | 0x20) != word[k]) return false;
  return true;
}

}  // namespace

std::optional<double> parse_finite_number(std::string_view text) {
  size_t b = 0, e = text.size();
  while (b < e && python_space(static_cast<unsigned char>(text[b]))) ++b;
  while (e > b && python_space(static_cast<unsigned char>(text[e - 1]))) --e;
  Scanner sc{text.substr(b, e - b), 0};
  bool negative = false;
  if (sc.at('+') || sc.at('-')) negative = sc.s[sc.i++] == '-';
  // inf, infinity and nan (any case) are Python floats, but not finite ones.
  const std::string_view rest = sc.s.substr(sc.i);
  if (equals_lower(rest, "inf") || equals_lower(rest, "infinity") || equals_lower(rest, "nan")) return std::nullopt;

  std::string integer, fraction, exponent;
  const size_t int_digits = sc.digitpart(integer);
  size_t frac_digits = 0;
  if (sc.at('.')) {
    ++sc.i;
    frac_digits = sc.digitpart(fraction);
  }
  if (int_digits == 0 && frac_digits == 0) return std::nullopt;  // "", ".", "e5", "-"
  bool exp_negative = false;
  if (sc.at('e') || sc.at('E')) {
    ++sc.i;
    if (sc.at('+') || sc.at('-')) exp_negative = sc.s[sc.i++] == '-';
    if (sc.digitpart(exponent) == 0) return std::nullopt;
  }
  if (sc.i != sc.s.size()) return std::nullopt;  // anything else: "0x1p2", "1,5", "1 2", non-ASCII

  const double zero = negative ? -0.0 : 0.0;
  // The decimal order of the first non-zero digit: value in [10^order, 10^(order+1)).
  int64_t order = 0;
  bool nonzero = false;
  for (size_t k = 0; k < integer.size() && !nonzero; ++k)
    if (integer[k] != '0') nonzero = true, order = static_cast<int64_t>(integer.size() - k) - 1;
  for (size_t k = 0; k < fraction.size() && !nonzero; ++k)
    if (fraction[k] != '0') nonzero = true, order = -static_cast<int64_t>(k) - 1;
  if (!nonzero) return zero;  // "0e99999", "-0.000": a zero of its sign
  int64_t exp_value = 0;  // saturated: beyond 10^9 only the side (over- or underflow) matters
  for (char c : exponent) exp_value = std::min<int64_t>(exp_value * 10 + (c - '0'), 1000000000);
  if (exp_negative) exp_value = -exp_value;

  std::string plain;  // sign, digits, '.', digits, 'e', exponent: what from_chars reads
  if (negative) plain.push_back('-');
  plain.append(integer.empty() ? std::string("0") : integer);
  plain.push_back('.');
  plain.append(fraction);
  plain.push_back('e');
  plain.append(std::to_string(exp_value));
  double v = 0;
  const auto [ptr, ec] = std::from_chars(plain.data(), plain.data() + plain.size(), v);
  if (ec == std::errc::result_out_of_range) {
    // from_chars gives no value then: below the smallest subnormal rounds to zero (Python),
    // above the largest double is infinite (refused).
    if (order + exp_value < 0) return zero;
    return std::nullopt;
  }
  if (ec != std::errc() || ptr != plain.data() + plain.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

}  // namespace tupe
