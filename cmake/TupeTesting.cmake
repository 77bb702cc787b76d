# Test helpers. Every test gets the environment:
#   TUPE_SHARED_DATA  ../shared/data (real corpora, GLUE, vocabularies)
#   TUPE_PYTHON       the venv Python with torch + transformers (reference implementations)
#   TUPE_SOURCE_DIR   the checkout, TUPE_BIN the `tupe` executable
include(GoogleTest)
set(TUPE_TEST_ENV
    "TUPE_SHARED_DATA=${TUPE_SHARED_DATA}" "TUPE_PYTHON=${TUPE_PYTHON}"
    "TUPE_SOURCE_DIR=${CMAKE_SOURCE_DIR}" "TUPE_BIN=$<TARGET_FILE:tupe>"
    "OMP_NUM_THREADS=1"
    # Open MPI in containers, as root: allow it, and no CMA single-copy (needs ptrace).
    "OMPI_ALLOW_RUN_AS_ROOT=1" "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"
    "OMPI_MCA_btl_vader_single_copy_mechanism=none" "OMPI_MCA_rmaps_base_oversubscribe=1")

# tupe_gtest(NAME name SOURCES a.cpp ... LIBS lib ...): one GoogleTest executable; each
# TEST() becomes one CTest test.
function(tupe_gtest)
  cmake_parse_arguments(T "" "NAME;TIMEOUT" "SOURCES;LIBS" ${ARGN})
  add_executable(${T_NAME} ${T_SOURCES})
  target_link_libraries(${T_NAME} PRIVATE GTest::gtest_main ${T_LIBS})
  target_compile_options(${T_NAME} PRIVATE ${TUPE_WARNINGS})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 600)
  endif()
  # gtest_discover_tests flattens PROPERTIES lists (only the first ENVIRONMENT entry would
  # survive), so the environment goes through the test "emulator", /usr/bin/env VAR=...,
  # which runs the discovery and every discovered test.
  set_target_properties(${T_NAME} PROPERTIES CROSSCOMPILING_EMULATOR "/usr/bin/env;${TUPE_TEST_ENV}")
  gtest_discover_tests(${T_NAME} DISCOVERY_MODE PRE_TEST DISCOVERY_TIMEOUT 60 PROPERTIES TIMEOUT ${T_TIMEOUT})
endfunction()

# tupe_mpi_test(NAME name NP n COMMAND exe args...): runs under mpirun with n ranks.
function(tupe_mpi_test)
  cmake_parse_arguments(T "" "NAME;NP;TIMEOUT" "COMMAND" ${ARGN})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 600)
  endif()
  add_test(NAME ${T_NAME}
           COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${T_NP} --oversubscribe
                   --bind-to none ${T_COMMAND})
  set_tests_properties(${T_NAME} PROPERTIES ENVIRONMENT "${TUPE_TEST_ENV}" TIMEOUT ${T_TIMEOUT})
endfunction()
