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
// phase    a start-up phase (dist/startup.h): the rank sleeps on entering that phase
//          instead, e.g. TUPE_TEST_STALL="rank=2,phase=config check,seconds=600"
//          phase=work: when the job's work begins (MpiEnv::end_startup), past start-up
// freeze   1: instead of sleeping, the rank stops itself with SIGSTOP (its heartbeat thread
//          too: a frozen node, dist/heartbeat.h); 0 (default): a sleep (a slow rank, whose
//          heartbeat goes on)
// marker   a file the rank creates when its sleep begins (a test waits for it, then
//          freezes the rank's node)
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
  std::string phase;        ///< a start-up phase to sleep in; empty: a training step's collective
  std::string marker;       ///< file created when the sleep begins; empty: none
  bool freeze = false;      ///< SIGSTOP the process instead of sleeping

  bool active() const { return rank >= 0; }
};

/// Parses "rank=R[,step=S][,seconds=T][,phase=NAME]" (an empty text is off). Throws tupe::Error
/// "TUPE_TEST_STALL: <cause>" on an unknown key, a bad number or a missing rank.
StallInjection parse_stall_injection(const std::string& text);

/// parse_stall_injection($TUPE_TEST_STALL); off when the variable is unset.
StallInjection stall_injection_from_env();

/// The phase name of the moment a job's work begins (MpiEnv::end_startup).
inline constexpr const char* kWorkPhase = "work";

/// The sleep itself: writes `where` to s.marker (when set), then sleeps s.seconds (or, with
/// s.freeze, stops the whole process with SIGSTOP until a SIGCONT or SIGKILL).
void sleep_for_stall(const StallInjection& s, const std::string& where);

}  // namespace tupe::dist
