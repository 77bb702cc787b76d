// The one syntax of real numbers in text the user writes: regression labels (STS-B scores,
// custom regression tasks) and real-valued config fields. It is Python's float() on the text
// stripped of whitespace, finite values only, ASCII only (docs/formats.md "Numbers").
#pragma once
#include <optional>
#include <string_view>

namespace tupe {

/// The value of `text` read as Python's float(text) reads it, or nullopt when float() would
/// refuse it, when it is not finite (inf, nan, an overflow such as 1e400), or when it holds a
/// non-ASCII byte. Accepts surrounding ASCII whitespace (space, \t \n \v \f \r),
/// a sign, "5", "5.", ".5", an exponent, and single underscores between digits ("1_000.5");
/// rejects hexadecimal floats ("0x1p2"). A value below the smallest subnormal rounds to a
/// zero of its sign ("1e-400" -> 0.0), as in Python. Correctly rounded (std::from_chars).
std::optional<double> parse_finite_number(std::string_view text);

}  // namespace tupe
