// common/number_syntax.h: the one syntax of regression labels and real config values,
// Python's float() on the stripped text, finite values only (docs/formats.md "Numbers").
// Expectations written here from the rule, and the same table (and more) run through
// Python's own float() by the python-ref test.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <iomanip>
#include <sstream>
#include <string>
#include <vector>

#include "common/number_syntax.h"
#include "tests/common/common_test_util.h"

namespace tupe {
namespace {

uint64_t bits(double v) {
  uint64_t u = 0;
  std::memcpy(&u, &v, sizeof u);
  return u;
}

TEST(CommonNumberSyntax, TheIssueCasesAndTheGrammar) {
  // Spaces: leading and trailing alike.
  EXPECT_EQ(parse_finite_number(" 2.5"), 2.5);
  EXPECT_EQ(parse_finite_number("2.5 "), 2.5);
  EXPECT_EQ(parse_finite_number("\t2.5\r\n"), 2.5);
  // Underflow is zero of the sign; overflow, inf and nan are not finite.
  EXPECT_EQ(bits(*parse_finite_number("1e-400")), bits(0.0));
  EXPECT_EQ(bits(*parse_finite_number("-1e-400")), bits(-0.0));
  EXPECT_EQ(parse_finite_number("4.9e-324"), std::nextafter(0.0, 1.0));  // the smallest subnormal
  for (const char* s : {"1e400", "-1e400", "inf", "-Infinity", "nan", "NaN", "+nan"})
    EXPECT_FALSE(parse_finite_number(s)) << s;
  // Hexadecimal floats and integers are refused (Python's float() refuses them).
  for (const char* s : {"0x1p2", "0X1P2", "0x10", "1p2"}) EXPECT_FALSE(parse_finite_number(s)) << s;
  // The decimal grammar: sign, "5.", ".5", exponents, single underscores between digits.
  EXPECT_EQ(parse_finite_number("+4."), 4.0);
  EXPECT_EQ(parse_finite_number("-.5"), -0.5);
  EXPECT_EQ(parse_finite_number("1.e3"), 1000.0);
  EXPECT_EQ(parse_finite_number("1E+3"), 1000.0);
  EXPECT_EQ(parse_finite_number("1_000.2_5"), 1000.25);
  EXPECT_EQ(parse_finite_number("1e1_0"), 1e10);
  EXPECT_EQ(parse_finite_number("0.1"), 0.1);  // correctly rounded
  EXPECT_EQ(parse_finite_number("0.30000000000000004"), 0.1 + 0.2);
  for (const char* s : {"", " ", ".", "e5", ".e5", "1e", "1e+", "+", "--1", "1__0", "_1", "1_", "1_.5", "1._5",
                        "1e_1", "1,5", "1 5", "1e5.5", "five"})
    EXPECT_FALSE(parse_finite_number(s)) << "'" << s << "'";
  EXPECT_FALSE(parse_finite_number(std::string("5\0", 2)));
  EXPECT_FALSE(parse_finite_number("\xc2\xa0" "1"));  // non-ASCII (a no-break space) is refused
}

// Strings whose float() result the test compares, with more drawn at random below.
const std::vector<std::string>& table() {
  static const std::vector<std::string> t = [] {
    std::vector<std::string> v = {
        "0", "1", "-1", "+1", "1.5", " 1.5", "1.5 ", " 1.5 ", "\t2\n", "\v3\f", "1.", ".5", ".", "-.5", "+.5e1",
        "1e5", "1E5", "1e+5", "1e-5", "1.e5", ".e5", "e5", "1e", "1e+", "0x1p2", "0X1P2", "0x10", "1p2", "inf",
        "-inf", "Infinity", "INF", "nan", "NaN", "-nan", "1e400", "-1e400", "1e-400", "-1e-400", "2e-324", "3e-324",
        "4.9e-324", "2.4703282292062327e-324", "2.4703282292062328e-324", "1.7976931348623157e308",
        "1.7976931348623159e308", "1_000.5", "1__0", "_1", "1_", "1_.5", "1._5", "1e1_0", "1e_1", "1,5", "1 5", "",
        " ", "--1", "+-1", "1e5.5", "0.1", "00012", "0e999999999999999999999", "1e-999999999999999999999",
        "1e999999999999999999999", "1.5\r", "\x1c" "4", "0.30000000000000004", "123456789012345678901234567890",
        "-0", "-0.0", "2.2250738585072011e-308", "4.4501477170144023e-308", std::string(400, '9'),
        "0." + std::string(400, '0') + "1", "1" + std::string(308, '0'), "1" + std::string(309, '0')};
    uint64_t state = 12345;  // a fixed linear congruential draw over the syntax's characters
    const std::string alphabet = "0123456789._eE+- x";
    for (int n = 0; n < 3000; ++n) {
      std::string s;
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      const int len = 1 + static_cast<int>((state >> 33) % 8);
      for (int k = 0; k < len; ++k) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        s.push_back(alphabet[(state >> 33) % alphabet.size()]);
      }
      v.push_back(s);
    }
    return v;
  }();
  return t;
}

TEST(CommonNumberSyntax, MatchesPythonFloat) {
  common_test::ScratchDir dir("number-syntax");
  std::ostringstream hex;
  for (const std::string& s : table()) {
    hex << 'x';  // keeps an empty string's line non-empty
    for (unsigned char c : s) hex << std::hex << std::setw(2) << std::setfill('0') << static_cast<int>(c);
    hex << '\n';
  }
  const std::string input = dir.write("strings.txt", hex.str());
  // The reference: Python's float() on each string, a finite result as its IEEE-754 bits.
  const std::string script =
      "import math, struct\n"
      "for line in open('" + input + "'):\n"
      "    s = bytes.fromhex(line.strip()[1:]).decode('ascii')\n"
      "    try:\n"
      "        v = float(s)\n"
      "    except ValueError:\n"
      "        print('refused'); continue\n"
      "    print(struct.unpack('<Q', struct.pack('<d', v))[0] if math.isfinite(v) else 'refused')\n";
  std::istringstream lines(common_test::run_python(script, dir));
  size_t n = 0, accepted = 0;
  for (std::string want; std::getline(lines, want); ++n) {
    ASSERT_LT(n, table().size());
    const std::string& s = table()[n];
    const std::optional<double> got = parse_finite_number(s);
    if (want == "refused") {
      EXPECT_FALSE(got) << "'" << s << "': Python refuses it (or it is not finite), tupe read " << *got;
    } else {
      ++accepted;
      ASSERT_TRUE(got) << "'" << s << "': Python reads it, tupe refuses it";
      EXPECT_EQ(bits(*got), std::stoull(want)) << "'" << s << "': " << *got;
    }
  }
  EXPECT_EQ(n, table().size());
  EXPECT_GT(accepted, 100u);  // the table exercises both sides
}

}  // namespace
}  // namespace tupe
