# Runs the 2-rank stall job (cmake -P) and passes only when it ENDS with a non-zero exit
# code and the watchdog's one-line message naming rank 0, step 3 and the collective.
# Variables: MPIEXEC, EXE, TIMEOUT_S. A hang is cut at 120 s (and fails the check).
# The stall is the test-only environment variable of dist/stall_injection.h; mpirun passes
# the environment to the ranks it starts on this machine (-x names it for any machine).
set(ENV{TUPE_TEST_STALL} "rank=1,step=3,seconds=600")
string(TIMESTAMP start "%s")
execute_process(
  COMMAND ${MPIEXEC} -np 2 --oversubscribe --bind-to none -x TUPE_TEST_STALL ${EXE} timeout_s=${TIMEOUT_S}
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 120)
string(TIMESTAMP stop "%s")
math(EXPR elapsed "${stop} - ${start}")
message("--- job output (exit: ${rc}, ${elapsed} s) ---\n${out}${err}---")
if(rc STREQUAL "0")
  message(FATAL_ERROR "the stalled job exited 0; the watchdog did not end it")
endif()
if(NOT rc MATCHES "^[0-9]+$")
  message(FATAL_ERROR "the stalled job did not end by itself: ${rc}")
endif()
set(want "tupe: watchdog: rank 0: collective 'mpi stall-test all_reduce' at step 3 did not finish within ${TIMEOUT_S} s")
string(FIND "${out}${err}" "${want}" at)
if(at EQUAL -1)
  message(FATAL_ERROR "the watchdog message is missing; expected a line with:\n  ${want}")
endif()
string(FIND "${out}" "step 2 done" at2)
string(FIND "${out}" "step 3 done" at3)
if(at2 EQUAL -1 OR NOT at3 EQUAL -1)
  message(FATAL_ERROR "steps 0-2 should complete and step 3 should not")
endif()
message("watchdog stall check passed")
