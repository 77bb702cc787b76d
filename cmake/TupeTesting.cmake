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

# Test tiers: every test carries at least one of these CTest LABELS (`ctest -L unit`).
#   unit        one process, no mpirun, no Python reference library, no `tupe` job; seconds.
#               `launch/test.sh --fast` (the unit tests of a GoogleTest executable are one CTest
#               test: tupe_gtest; tests/docs runs a standard-library script and `tupe ... --help`)
#   mpi         ranks under mpirun
#   python-ref  compared against a Python reference run by the test (torch, transformers,
#               tokenizers, h5py, scikit-learn, safetensors, a reference written in the test)
#   e2e         the `tupe` executable or a launch/ script end to end
#   gpu         CUDA (reports itself skipped without a GPU)
#   cluster     ranks on nodes simulated with namespaces (launch/sim_cluster.sh): multi-node
#               placement, node and link faults, node-local storage, Slurm; reports itself
#               skipped where namespaces are not permitted (tests/cluster/README.md)
# The test TestTiers_every_test_has_one (tests/check_test_tiers.cmake) fails when a test has
# no tier or a label that is no tier.
set(TUPE_TEST_TIERS unit mpi python-ref e2e gpu cluster)

# tupe_check_tiers(where label...): a configure error unless every label is a tier.
function(tupe_check_tiers where)
  if(ARGC LESS 2)
    message(FATAL_ERROR "${where}: no test tier (one of ${TUPE_TEST_TIERS})")
  endif()
  foreach(label ${ARGN})
    if(NOT label IN_LIST TUPE_TEST_TIERS)
      message(FATAL_ERROR "${where}: '${label}' is not a test tier (${TUPE_TEST_TIERS})")
    endif()
  endforeach()
endfunction()

# tupe_gtest(NAME name SOURCES a.cpp ... LIBS lib ... [TIMEOUT s] [LABELS tier]
#            [TIERS "tier=gtest-filter" ...]): one GoogleTest executable. Its tests carry the
# tier LABELS (default: unit), except those matched by a TIERS entry's filter (gtest syntax:
# Suite.Name patterns joined by ':'), which carry that entry's tier instead, e.g.
# TIERS "python-ref=TrainerOptimizers.AdamW*:CheckpointSafetensors.*Python*".
# The unit tests of the executable run as ONE CTest test named after it, in one process: a
# process that loads LibTorch costs about half a second of CPU before its first test, more
# than most unit tests take, so one process per test would make the unit tier several times
# slower (launch/test.sh --fast). Run one of them with `<executable> --gtest_filter=Suite.Name`.
# Every test of the other tiers is its own CTest test (gtest_discover_tests), one tier per
# group: gtest_discover_tests flattens PROPERTIES lists, so a list of labels would not survive.
function(tupe_gtest)
  cmake_parse_arguments(T "" "NAME;TIMEOUT;LABELS" "SOURCES;LIBS;TIERS" ${ARGN})
  add_executable(${T_NAME} ${T_SOURCES})
  target_link_libraries(${T_NAME} PRIVATE GTest::gtest_main ${T_LIBS})
  target_compile_options(${T_NAME} PRIVATE ${TUPE_WARNINGS})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 600)
  endif()
  if(NOT T_LABELS)
    set(T_LABELS unit)
  endif()
  tupe_check_tiers("${T_NAME}" ${T_LABELS})
  # gtest_discover_tests flattens PROPERTIES lists (only the first ENVIRONMENT entry would
  # survive), so the environment goes through the test "emulator", /usr/bin/env VAR=...,
  # which runs the discovery and every discovered test.
  set_target_properties(${T_NAME} PROPERTIES CROSSCOMPILING_EMULATOR "/usr/bin/env;${TUPE_TEST_ENV}")
  set(others "")
  foreach(entry ${T_TIERS})
    if(NOT entry MATCHES "^([a-z0-9-]+)=(.+)$")
      message(FATAL_ERROR "${T_NAME}: TIERS entry '${entry}' is not tier=gtest-filter")
    endif()
    set(tier ${CMAKE_MATCH_1})
    set(filter ${CMAKE_MATCH_2})
    tupe_check_tiers("${T_NAME} TIERS" ${tier})
    if(tier STREQUAL "unit")
      message(FATAL_ERROR "${T_NAME}: unit is the default group (LABELS), not a TIERS entry")
    endif()
    gtest_discover_tests(${T_NAME} DISCOVERY_MODE PRE_TEST DISCOVERY_TIMEOUT 60 TEST_FILTER "${filter}"
                         PROPERTIES TIMEOUT ${T_TIMEOUT} LABELS ${tier})
    string(APPEND others ":${filter}")
  endforeach()
  set(rest "")
  if(others)
    string(SUBSTRING "${others}" 1 -1 others)
    set(rest "-${others}")
  endif()
  if(T_LABELS STREQUAL "unit")
    set(filter_arg "")
    if(rest)
      set(filter_arg "--gtest_filter=${rest}")
    endif()
    # $<TARGET_FILE:...>, not the target name: CTest would put the emulator in front, whose
    # TUPE_BIN=$<TARGET_FILE:tupe> is not evaluated there; ENVIRONMENT is.
    add_test(NAME ${T_NAME} COMMAND $<TARGET_FILE:${T_NAME}> ${filter_arg})
    set_tests_properties(${T_NAME} PROPERTIES ENVIRONMENT "${TUPE_TEST_ENV}" TIMEOUT ${T_TIMEOUT} LABELS unit)
  else()
    if(rest)
      set(rest TEST_FILTER "${rest}")
    endif()
    gtest_discover_tests(${T_NAME} DISCOVERY_MODE PRE_TEST DISCOVERY_TIMEOUT 60 ${rest}
                         PROPERTIES TIMEOUT ${T_TIMEOUT} LABELS ${T_LABELS})
  endif()
endfunction()

# tupe_test_paths(target): where the target's executable finds the checkout, the build and
# the shared data (tests/support/test_paths.h), compiled in RELATIVE to the executable's
# folder: an absolute path in a -D would make every checkout's compile command differ, and
# ccache would miss for it in a second checkout.
function(tupe_test_paths target)
  get_target_property(exe_dir ${target} RUNTIME_OUTPUT_DIRECTORY)
  if(NOT exe_dir)
    set(exe_dir ${CMAKE_CURRENT_BINARY_DIR})
  endif()
  get_filename_component(shared "${TUPE_SHARED_DATA}" ABSOLUTE)
  file(RELATIVE_PATH to_source "${exe_dir}" "${CMAKE_SOURCE_DIR}")
  file(RELATIVE_PATH to_build "${exe_dir}" "${CMAKE_BINARY_DIR}")
  file(RELATIVE_PATH to_shared "${exe_dir}" "${shared}")
  target_compile_definitions(${target} PRIVATE TUPE_TEST_TO_SOURCE="${to_source}" TUPE_TEST_TO_BUILD="${to_build}"
                                               TUPE_TEST_TO_SHARED="${to_shared}")
endfunction()

# tupe_mpi_test(NAME name NP n COMMAND exe args... [LABELS tier...]): runs under mpirun with
# n ranks; tiers: mpi plus LABELS (e.g. e2e for a `tupe` job).
function(tupe_mpi_test)
  cmake_parse_arguments(T "" "NAME;NP;TIMEOUT" "COMMAND;LABELS" ${ARGN})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 600)
  endif()
  set(labels mpi ${T_LABELS})
  tupe_check_tiers("${T_NAME}" ${labels})
  add_test(NAME ${T_NAME}
           COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${T_NP} --oversubscribe
                   --bind-to none ${T_COMMAND})
  set_tests_properties(${T_NAME} PROPERTIES ENVIRONMENT "${TUPE_TEST_ENV}" TIMEOUT ${T_TIMEOUT}
                       LABELS "${labels}")
endfunction()
