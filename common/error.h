// Errors of tupe: one exception type whose message is one line naming the place (a file,
// a config key, a tensor name) and the cause. The CLI prints it and exits non-zero.
// Input checks use TUPE_CHECK (never assert(), which NDEBUG compiles out).
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>

namespace tupe {

/// A user-facing error: `what()` is one line, "<place>: <cause>".
struct Error : std::runtime_error {
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

/// An error every rank of an MPI job raised together, after a collective agreement (e.g.
/// "the ranks' configs differ"): no rank waits for another, so each leaves normally; only
/// rank 0 prints it (cli/rank_guard.h).
struct AgreedError : Error {
  explicit AgreedError(const std::string& message) : Error(message) {}
};

namespace detail {
[[noreturn]] inline void throw_error(const std::string& message) { throw Error(message); }
}  // namespace detail

}  // namespace tupe

/// TUPE_CHECK(cond, "place: cause " << value): throws tupe::Error when cond is false.
#define TUPE_CHECK(cond, stream_expr)                    \
  do {                                                   \
    if (!(cond)) {                                       \
      std::ostringstream tupe_check_os_;                 \
      tupe_check_os_ << stream_expr;                     \
      ::tupe::detail::throw_error(tupe_check_os_.str()); \
    }                                                    \
  } while (0)

/// TUPE_FAIL("place: cause " << value): throws tupe::Error unconditionally.
#define TUPE_FAIL(stream_expr) TUPE_CHECK(false, stream_expr)
