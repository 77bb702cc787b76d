// Test-only fault injection for the watchdog tests: one rank sleeps before a collective,
// so that its peers' collective never finishes and the watchdog must end the job.
//
// It is read from the environment variable TUPE_TEST_STALL, never from a config file or
// the command line (it is no user option and does not appear in --help):
//   TUPE_TEST_STALL="rank=1,step=3,seconds=600"
// rank     the rank that sleeps (required)
// step     the training step (Communicator::set_step) whose first collective it sleeps
//          before; absent or -1: the first collective of any step
// seconds  length of the sleep (default 3600)
// The sleep happens once per communicator. Unset or empty: off.
#pragma once
#include <cstdint>
#include <string>

namespace tupe::dist {

/// Name of the environment variable read by stall_injection_from_env().
inline constexpr const char* kStallInjectionEnv = "TUPE_TEST_STALL";

struct StallInjection {
  int64_t rank = -1;        ///< the rank that sleeps; -1 = off
  int64_t step = -1;        ///< step whose first collective the sleep precedes; -1 = any step
  double seconds = 3600.0;  ///< length of the sleep (seconds)

  bool active() const { return rank >= 0; }
};

/// Parses "rank=R[,step=S][,seconds=T]" (an empty text is off). Throws tupe::Error
/// "TUPE_TEST_STALL: <cause>" on an unknown key, a bad number or a missing rank.
StallInjection parse_stall_injection(const std::string& text);

/// parse_stall_injection($TUPE_TEST_STALL); off when the variable is unset.
StallInjection stall_injection_from_env();

}  // namespace tupe::dist
