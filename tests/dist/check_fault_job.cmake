# Runs one failure job of dist_fault_job (cmake -P) and passes only when it ENDS by itself
# within LIMIT_S seconds, with the wanted exit code (WANT_RC; "nonzero" for any) and a line
# holding WANT in its output, and without FORBID (a crash, a sanitizer report, the peers'
# watchdog). Variables: MPIEXEC, EXE, MODE, NP, WANT, WANT_RC, LIMIT_S, FORBID (a regex).
# A hang is cut at 120 s and fails.
string(TIMESTAMP start "%s")
execute_process(
  COMMAND ${MPIEXEC} -np ${NP} --oversubscribe --bind-to none ${EXE} ${MODE}
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 120)
string(TIMESTAMP stop "%s")
math(EXPR elapsed "${stop} - ${start}")
message("--- ${MODE} job output (exit: ${rc}, ${elapsed} s) ---\n${out}${err}---")
if(NOT rc MATCHES "^[0-9]+$")
  message(FATAL_ERROR "the ${MODE} job did not end by itself: ${rc}")
endif()
if(WANT_RC STREQUAL "nonzero")
  if(rc EQUAL 0)
    message(FATAL_ERROR "the ${MODE} job exited 0")
  endif()
elseif(NOT rc EQUAL WANT_RC)
  message(FATAL_ERROR "the ${MODE} job exited ${rc}, expected ${WANT_RC}")
endif()
if(elapsed GREATER LIMIT_S)
  message(FATAL_ERROR "the ${MODE} job took ${elapsed} s, more than ${LIMIT_S} s")
endif()
string(FIND "${out}${err}" "${WANT}" at)
if(at EQUAL -1)
  message(FATAL_ERROR "no line with:\n  ${WANT}")
endif()
if("${out}${err}" MATCHES "${FORBID}")
  message(FATAL_ERROR "the output matches '${FORBID}'")
endif()
message("${MODE} job check passed (${elapsed} s)")
