# Apache Arrow and Parquet C++: the Parquet and Arrow IPC corpora of `tupe preprocess`
# (data_pipeline/columnar_read.cpp). They come from the pinned pyarrow wheel (launch/setup.sh),
# found through TUPE_PYTHON the way LibTorch is found from the torch wheel: the headers at
# pyarrow.get_include(), the libraries at pyarrow.get_library_dirs(). The wheel ships only the
# versioned files (libarrow.so.2600, libparquet.so.2600; no libarrow.so link), so each is an
# IMPORTED target naming that file, and the executables find it through their RPATH.
#
# What the wheel's libraries bring along (checked with nm -D / readelf -d on pyarrow 26.0.1):
# they need only glibc, libstdc++ (GLIBCXX_3.4.22) and libgcc; they use the C++11 string ABI
# (std::__cxx11), as LibTorch's wheel does; their bundled protobuf, zstd, lz4, snappy, thrift
# and abseil are linked in with hidden symbols (libarrow exports only template instances for
# opentelemetry's own message types, no google::protobuf function). libparquet, however,
# exports the C symbols of the OpenSSL it bundles (EVP_*, SHA256, ...; unversioned), the
# same names as Debian's libcrypto.so.3, which common/sha256.cpp calls. The dynamic linker
# binds each name to the first library that defines it, in the order of the executable's
# DT_NEEDED entries, and the static linker to the first one it keeps. Debian's gcc links
# --as-needed, and sha256.o is pulled from libtupe_common.a late in the link line (after
# libparquet), so a plain link made libparquet the provider of EVP_* and dropped libcrypto.so.3
# from DT_NEEDED. tupe_arrow therefore names libcrypto with --no-as-needed right before
# libparquet: Debian's libcrypto is then NEEDED ahead of libparquet and serves every OpenSSL
# call (tupe's and libcrypto's own). libparquet's own references to those names then bind to
# libcrypto too; it makes them only for encrypted Parquet files, which tupe does not read (no decryption keys are given:
# such a file is refused). The test DataColumnar_openssl_binds_to_libcrypto checks the binding
# with LD_DEBUG=bindings on the built `tupe`.
#
# TUPE_WITH_ARROW=OFF builds without them (a GPU host that brings its own Python, without
# pip): Parquet and Arrow inputs are then refused in one line.
option(TUPE_WITH_ARROW "Read Parquet and Arrow IPC corpora (Apache Arrow C++ from the pyarrow wheel)" ON)
set(TUPE_ARROW_MIN_VERSION 26.0)  # the pinned (and oldest compiled) pyarrow
set(TUPE_HAVE_ARROW OFF)
if(TUPE_WITH_ARROW)
  execute_process(
    COMMAND "${TUPE_PYTHON}" -c
            "import pyarrow; print(pyarrow.__version__); print(pyarrow.get_include()); print(pyarrow.get_library_dirs()[0])"
    OUTPUT_VARIABLE _pa_out ERROR_VARIABLE _pa_err RESULT_VARIABLE _pa_rc OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT _pa_rc EQUAL 0)
    string(REGEX REPLACE "\n$" "" _pa_err "${_pa_err}")
    string(REGEX REPLACE ".*\n" "" _pa_err "${_pa_err}")
    message(FATAL_ERROR "TUPE_WITH_ARROW: ${TUPE_PYTHON} cannot import pyarrow (${_pa_err}); run launch/setup.sh "
                        "(it pins pyarrow), or configure with -DTUPE_WITH_ARROW=OFF to build without Parquet/Arrow input")
  endif()
  string(REPLACE "\n" ";" _pa_out "${_pa_out}")
  list(GET _pa_out 0 TUPE_ARROW_VERSION)
  list(GET _pa_out 1 _pa_include)
  list(GET _pa_out 2 _pa_libdir)
  if(TUPE_ARROW_VERSION VERSION_LESS TUPE_ARROW_MIN_VERSION)
    message(FATAL_ERROR "pyarrow ${TUPE_ARROW_VERSION} at ${TUPE_PYTHON}: tupe needs ${TUPE_ARROW_MIN_VERSION} or newer "
                        "(launch/setup.sh pins it)")
  endif()
  # The library's SONAME: libarrow.so.<major * 100 + minor> (26.0.1: libarrow.so.2600).
  string(REGEX MATCH "^([0-9]+)\\.([0-9]+)" _pa_mm "${TUPE_ARROW_VERSION}")
  math(EXPR _pa_so "${CMAKE_MATCH_1} * 100 + ${CMAKE_MATCH_2}")
  set(_header_arrow arrow/api.h)
  set(_header_parquet parquet/arrow/reader.h)
  foreach(lib arrow parquet)
    set(_file "${_pa_libdir}/lib${lib}.so.${_pa_so}")
    if(NOT EXISTS "${_file}" OR NOT EXISTS "${_pa_include}/${_header_${lib}}")
      message(FATAL_ERROR "pyarrow ${TUPE_ARROW_VERSION}: ${_file} or ${_pa_include}/${_header_${lib}} missing "
                          "(a pyarrow without its C++ libraries?)")
    endif()
    add_library(tupe_${lib}_so SHARED IMPORTED)
    set_target_properties(tupe_${lib}_so PROPERTIES IMPORTED_LOCATION "${_file}" IMPORTED_SONAME "lib${lib}.so.${_pa_so}")
  endforeach()
  # OpenSSL::Crypto first: see above (the binding order of the OpenSSL names). The target
  # carries the libraries only; the headers and TUPE_HAVE_ARROW=1 go to the one source file
  # that includes them (tupe_arrow_sources), so the other files of its library keep their
  # compile commands (and their ccache entries).
  add_library(tupe_arrow INTERFACE)
  get_target_property(_crypto OpenSSL::Crypto IMPORTED_LOCATION)
  if(NOT _crypto)
    set(_crypto "${OPENSSL_CRYPTO_LIBRARY}")
  endif()
  # One item (CMake drops a library path it has already seen, e.g. from HDF5's list).
  target_link_libraries(tupe_arrow INTERFACE "-Wl,--push-state,--no-as-needed,${_crypto},--pop-state" tupe_parquet_so
                        tupe_arrow_so)
  set(TUPE_ARROW_INCLUDE_DIR "${_pa_include}")
  # Where the executables find the two libraries at run time (old-style DT_RPATH, like
  # LibTorch's folder above): the wheel's folder.
  add_link_options("LINKER:-rpath,${_pa_libdir}")
  set(TUPE_HAVE_ARROW ON)
  message(STATUS "tupe: Apache Arrow ${TUPE_ARROW_VERSION} (pyarrow at ${_pa_libdir}): Parquet and Arrow IPC input")
else()
  message(STATUS "tupe: TUPE_WITH_ARROW=OFF: no Parquet or Arrow IPC input")
endif()

# tupe_arrow_sources(file...): these files include Arrow's headers (with TUPE_HAVE_ARROW=1),
# where the build has them.
function(tupe_arrow_sources)
  if(TUPE_HAVE_ARROW)
    set_source_files_properties(${ARGN} DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR} PROPERTIES
                                COMPILE_DEFINITIONS TUPE_HAVE_ARROW=1 COMPILE_OPTIONS "-isystem;${TUPE_ARROW_INCLUDE_DIR}")
  endif()
endfunction()
