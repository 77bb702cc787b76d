# The dependency order of tupe's libraries (docs/architecture.md "Layers"), and its checks.
#
# Each entry: library | folder | the libraries it may use (comma-separated). A file belongs to the library of
# the longest folder that holds it (trainer/finetune/tasks/x.h: tupe_finetune), except the
# files named in TUPE_LAYER_FILES. A library may use only what its entry lists; cli/ (the
# executable) may use everything. Two checks, both failing the configure step:
#   tupe_check_layers()            every library's link libraries, and every #include "..."
#                                  of every source file of a library folder;
#   cmake -DSOURCE_DIR=... -P cmake/TupeLayers.cmake
#                                  the #include check alone (the CTest tests
#                                  Layers_dependency_order and Layers_back_edge_is_refused).
if(CMAKE_SCRIPT_MODE_FILE)
  cmake_minimum_required(VERSION 3.25)  # the project's policies in script mode too
endif()

set(TUPE_LAYERS
    "tupe_common|common|"
    "tupe_metrics|metrics|tupe_common"
    "tupe_model|model|tupe_common"
    "tupe_text|data_pipeline/text|tupe_common"
    "tupe_data_pipeline|data_pipeline|tupe_text,tupe_common"
    "tupe_dist|dist|tupe_common"
    "tupe_checkpoint|checkpoint|tupe_model,tupe_common"
    "tupe_trainer|trainer|tupe_checkpoint,tupe_dist,tupe_common"
    "tupe_pretrain|trainer/pretrain|tupe_metrics,tupe_trainer,tupe_checkpoint,tupe_model,tupe_data_pipeline,tupe_text,tupe_dist,tupe_common"
    "tupe_finetune|trainer/finetune|tupe_metrics,tupe_trainer,tupe_checkpoint,tupe_model,tupe_text,tupe_dist,tupe_common"
    "tupe_export|tools/export|tupe_checkpoint,tupe_model,tupe_data_pipeline,tupe_text,tupe_common"
    "tupe_analyze|tools/analyze|tupe_checkpoint,tupe_model,tupe_data_pipeline,tupe_text,tupe_common"
    "tupe_predict|tools/predict|tupe_export,tupe_trainer,tupe_checkpoint,tupe_model,tupe_text,tupe_dist,tupe_common"
    "tupe|cli|*")
# Files outside their library's folder: the tokenizer interface is tupe_text's.
set(TUPE_LAYER_FILES "data_pipeline/tokenizer.h=tupe_text")

# Splits the table into TUPE_LAYER_LIBS, TUPE_LAYER_FOLDER_<lib>, TUPE_LAYER_ALLOWED_<lib>.
macro(tupe_read_layers)
  set(TUPE_LAYER_LIBS "")
  foreach(entry IN LISTS TUPE_LAYERS)
    string(REPLACE "|" ";" parts "${entry}")
    list(GET parts 0 lib)
    list(GET parts 1 folder)
    list(LENGTH parts n)
    set(allowed "")
    if(n GREATER 2)
      list(GET parts 2 allowed)
      string(REPLACE "," ";" allowed "${allowed}")
    endif()
    list(APPEND TUPE_LAYER_LIBS ${lib})
    set(TUPE_LAYER_FOLDER_${lib} "${folder}")
    set(TUPE_LAYER_ALLOWED_${lib} "${allowed}")
  endforeach()
endmacro()

# The library `path` (relative to the source root) belongs to, or "" for none.
function(tupe_layer_owner path out)
  foreach(override IN LISTS TUPE_LAYER_FILES)
    string(REPLACE "=" ";" kv "${override}")
    list(GET kv 0 file)
    list(GET kv 1 lib)
    if(path STREQUAL file)
      set(${out} ${lib} PARENT_SCOPE)
      return()
    endif()
  endforeach()
  set(best "")
  set(best_length 0)
  foreach(lib IN LISTS TUPE_LAYER_LIBS)
    set(folder "${TUPE_LAYER_FOLDER_${lib}}/")
    string(LENGTH "${folder}" length)
    string(FIND "${path}" "${folder}" at)
    if(at EQUAL 0 AND length GREATER best_length)
      set(best ${lib})
      set(best_length ${length})
    endif()
  endforeach()
  set(${out} "${best}" PARENT_SCOPE)
endfunction()

# Whether library `lib` may use library `other`.
function(tupe_layer_allows lib other out)
  set(allowed "${TUPE_LAYER_ALLOWED_${lib}}")
  if(lib STREQUAL other OR allowed STREQUAL "*" OR other IN_LIST allowed)
    set(${out} TRUE PARENT_SCOPE)
  else()
    set(${out} FALSE PARENT_SCOPE)
  endif()
endfunction()

# Every #include "..." of every source file under `source_dir`'s library folders; fails with
# one line per back-edge (FATAL_ERROR), naming the file, the header and the rule.
function(tupe_check_layer_includes source_dir)
  tupe_read_layers()
  set(violations "")
  set(checked 0)
  foreach(lib IN LISTS TUPE_LAYER_LIBS)
    file(GLOB_RECURSE files RELATIVE "${source_dir}" "${source_dir}/${TUPE_LAYER_FOLDER_${lib}}/*.h"
         "${source_dir}/${TUPE_LAYER_FOLDER_${lib}}/*.cpp")
    foreach(file IN LISTS files)
      tupe_layer_owner("${file}" owner)
      if(NOT owner STREQUAL lib)
        continue()  # a nested library's file: checked with that library
      endif()
      math(EXPR checked "${checked} + 1")
      file(STRINGS "${source_dir}/${file}" lines REGEX "^[ \t]*#[ \t]*include[ \t]*\"")
      foreach(line IN LISTS lines)
        string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*\"([^\"]+)\".*" "\\1" header "${line}")
        tupe_layer_owner("${header}" used)
        if(used STREQUAL "")
          continue()  # not one of ours (a generated header, tests/...)
        endif()
        tupe_layer_allows(${lib} ${used} ok)
        if(NOT ok)
          list(APPEND violations "${file} includes ${header}: ${lib} (${TUPE_LAYER_FOLDER_${lib}}/) may not use ${used}")
        endif()
      endforeach()
    endforeach()
  endforeach()
  if(violations)
    list(JOIN violations "\n  " text)
    message(FATAL_ERROR "layers: dependency back-edge(s) (cmake/TupeLayers.cmake, docs/architecture.md):\n  ${text}")
  endif()
  message(STATUS "tupe: layers: ${checked} source files include only what their library may use")
endfunction()

# The configure-time check: link libraries of every library target, then the includes.
function(tupe_check_layers)
  tupe_read_layers()
  set(violations "")
  foreach(lib IN LISTS TUPE_LAYER_LIBS)
    if(NOT TARGET ${lib})
      message(FATAL_ERROR "layers: cmake/TupeLayers.cmake names ${lib}, which no CMakeLists.txt defines")
    endif()
    get_target_property(links ${lib} LINK_LIBRARIES)
    if(NOT links)
      continue()
    endif()
    foreach(used IN LISTS links)
      if(NOT used IN_LIST TUPE_LAYER_LIBS)
        continue()  # an external library (torch, MPI, HDF5, ...)
      endif()
      tupe_layer_allows(${lib} ${used} ok)
      if(NOT ok)
        list(APPEND violations "${lib} links ${used}: ${TUPE_LAYER_FOLDER_${lib}}/ may not use it")
      endif()
    endforeach()
  endforeach()
  if(violations)
    list(JOIN violations "\n  " text)
    message(FATAL_ERROR "layers: dependency back-edge(s) (cmake/TupeLayers.cmake, docs/architecture.md):\n  ${text}")
  endif()
  tupe_check_layer_includes("${CMAKE_SOURCE_DIR}")
endfunction()

# Script mode: cmake -DSOURCE_DIR=<tree> -P cmake/TupeLayers.cmake
if(CMAKE_SCRIPT_MODE_FILE AND CMAKE_SCRIPT_MODE_FILE STREQUAL CMAKE_CURRENT_LIST_FILE)
  if(NOT SOURCE_DIR)
    message(FATAL_ERROR "usage: cmake -DSOURCE_DIR=<source tree> -P cmake/TupeLayers.cmake")
  endif()
  tupe_check_layer_includes("${SOURCE_DIR}")
endif()
