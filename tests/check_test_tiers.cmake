cmake_minimum_required(VERSION 3.25)
# Passes when every CTest test of the build folder carries a test tier (cmake/TupeTesting.cmake)
# and no label is anything else. Run by CTest as TestTiers_every_test_has_one (cmake -P).
# Variables: CTEST (the ctest executable), BUILD (the build folder), TIERS (the tiers, ','-separated).
string(REPLACE "," ";" TIERS "${TIERS}")
list(JOIN TIERS "|" alternatives)
# The listing runs in a scratch project that includes the build folder's tests: a ctest run in
# the build folder itself would rewrite Testing/Temporary/LastTest.log under the suite that is
# running this very test (and leave it empty at the end).
set(scratch "${BUILD}/tier-check")
file(MAKE_DIRECTORY "${scratch}")
file(WRITE "${scratch}/CTestTestfile.cmake" "subdirs(\"${BUILD}\")\n")
execute_process(COMMAND ${CTEST} -N -FA ".*" -LE "^(${alternatives})$" WORKING_DIRECTORY ${scratch}
                OUTPUT_VARIABLE untiered RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR NOT untiered MATCHES "Total Tests: 0")
  message(FATAL_ERROR "tests without a tier (${TIERS}); give each LABELS (cmake/TupeTesting.cmake):\n${untiered}")
endif()
execute_process(COMMAND ${CTEST} --print-labels WORKING_DIRECTORY ${scratch} OUTPUT_VARIABLE printed RESULT_VARIABLE rc)
string(REGEX MATCHALL "\n  [^\n]+" labels "${printed}")
set(bad "")
foreach(label ${labels})
  string(STRIP "${label}" label)
  if(NOT label IN_LIST TIERS)
    list(APPEND bad "${label}")
  endif()
endforeach()
if(NOT rc EQUAL 0 OR bad)
  message(FATAL_ERROR "labels that are no test tier (${TIERS}): ${bad}\n${printed}")
endif()
list(LENGTH labels n)
message("every test has a tier; ${n} labels in use")
