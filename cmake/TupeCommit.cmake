# Run at build time (cmake -P), before build_info.cpp compiles: writes OUT, a header defining
# TUPE_BUILD_COMMIT as `git describe --always --dirty --tags` of SRC gives it now ("unknown"
# when SRC is no git checkout of its own, e.g. a folder inside another project's repository).
# The file is rewritten only when the text changes, so a build at the same commit recompiles
# nothing and a new commit (or a newly dirty tree) recompiles build_info.cpp alone.
# Usage: cmake -DSRC=<source dir> -DOUT=<header> [-DGIT=<git executable>] -P TupeCommit.cmake
set(_commit unknown)
if(GIT AND EXISTS "${GIT}")
  execute_process(COMMAND "${GIT}" rev-parse --show-toplevel WORKING_DIRECTORY "${SRC}"
                  OUTPUT_VARIABLE _top OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE _rc)
  if(_rc EQUAL 0 AND EXISTS "${_top}")
    file(REAL_PATH "${_top}" _top)
    file(REAL_PATH "${SRC}" _src)
    if(_top STREQUAL _src)
      execute_process(COMMAND "${GIT}" describe --always --dirty --tags WORKING_DIRECTORY "${SRC}"
                      OUTPUT_VARIABLE _describe OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE _rc)
      if(_rc EQUAL 0 AND _describe)
        set(_commit "${_describe}")
      endif()
    endif()
  endif()
endif()
set(_text "// Written by cmake/TupeCommit.cmake at build time.\n#define TUPE_BUILD_COMMIT \"${_commit}\"\n")
set(_old "")
if(EXISTS "${OUT}")
  file(READ "${OUT}" _old)
endif()
if(NOT _old STREQUAL _text)
  file(WRITE "${OUT}" "${_text}")
endif()
