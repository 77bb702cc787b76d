# The non-torch dependencies: Open MPI, HDF5 (serial), Boost.Program_options,
# nlohmann-json, ICU, SentencePiece, OpenSSL (crypto), spdlog/fmt, zlib, libzstd, Threads.
#
# Two ways to get them:
#  - installed system-wide (Debian's -dev packages, launch/setup.sh): the usual finders;
#  - TUPE_DEPS_PREFIX=<folder>/usr, Debian 12 packages unpacked with `dpkg -x <deb> <folder>`
#    (a GPU host without network or root, launch/gpu_check.sh). dpkg -x runs no post-install
#    step, so the names Debian's `alternatives` would make do not exist (mpicc, mpicxx,
#    mpirun, h5cc), and pkg-config files and the MPI/HDF5 compiler wrappers name /usr or
#    need the prefix's libraries to run. This file then names the real files under the
#    prefix itself and never runs a wrapper.
# Configure fails with the missing piece named rather than guessing.
set(TUPE_DEPS_PREFIX "" CACHE PATH "Relocated Debian prefix (<folder>/usr of dpkg -x) holding MPI, HDF5, Boost, ...")
set(_multiarch "x86_64-linux-gnu")

find_package(Threads REQUIRED)

if(TUPE_DEPS_PREFIX)
  get_filename_component(TUPE_DEPS_PREFIX "${TUPE_DEPS_PREFIX}" ABSOLUTE)
  if(NOT EXISTS "${TUPE_DEPS_PREFIX}/include")
    message(FATAL_ERROR "TUPE_DEPS_PREFIX=${TUPE_DEPS_PREFIX}: no include/ folder (expected <dpkg -x folder>/usr)")
  endif()
  list(PREPEND CMAKE_PREFIX_PATH "${TUPE_DEPS_PREFIX}" "${TUPE_DEPS_PREFIX}/lib/${_multiarch}/cmake")
  # What the compiler searches under /usr by itself: the multiarch headers (e.g. OpenSSL's
  # opensslconf.h lives in include/x86_64-linux-gnu/openssl).
  include_directories(SYSTEM "${TUPE_DEPS_PREFIX}/include/${_multiarch}")
  # Where the loader finds the prefix's libraries and what they load (libopen-rte next to
  # libmpi, libsz next to HDF5, ...): the executables' RPATH (old-style DT_RPATH, which
  # serves the transitive dependencies too), so no LD_LIBRARY_PATH is needed.
  list(APPEND CMAKE_BUILD_RPATH "${TUPE_DEPS_PREFIX}/lib/${_multiarch}" "${TUPE_DEPS_PREFIX}/lib/${_multiarch}/openmpi/lib"
       "${TUPE_DEPS_PREFIX}/lib/${_multiarch}/hdf5/serial")
  # Open MPI, without its compiler wrappers (they are Debian binaries that need the
  # prefix's libraries at run time): the headers, libmpi, and an mpirun that runs there.
  set(_ompi "${TUPE_DEPS_PREFIX}/lib/${_multiarch}/openmpi")
  find_path(TUPE_MPI_INCLUDE_DIR mpi.h PATHS "${_ompi}/include" NO_DEFAULT_PATH)
  find_library(TUPE_MPI_LIBRARY NAMES mpi PATHS "${_ompi}/lib" "${TUPE_DEPS_PREFIX}/lib/${_multiarch}" NO_DEFAULT_PATH)
  if(NOT TUPE_MPI_INCLUDE_DIR OR NOT TUPE_MPI_LIBRARY)
    message(FATAL_ERROR "TUPE_DEPS_PREFIX: Open MPI not found under ${_ompi} (headers: ${TUPE_MPI_INCLUDE_DIR}, "
                        "library: ${TUPE_MPI_LIBRARY}); libopenmpi-dev not unpacked?")
  endif()
  file(STRINGS "${TUPE_MPI_INCLUDE_DIR}/mpi.h" _mpiv REGEX "#define MPI_(VERSION|SUBVERSION)[ \t]")
  string(REGEX REPLACE ".*MPI_VERSION[ \t]+([0-9]+).*" "\\1" _mpimajor "${_mpiv}")
  string(REGEX REPLACE ".*MPI_SUBVERSION[ \t]+([0-9]+).*" "\\1" _mpiminor "${_mpiv}")
  if("${_mpimajor}.${_mpiminor}" VERSION_LESS 3.1)
    message(FATAL_ERROR "Open MPI under ${TUPE_DEPS_PREFIX} implements MPI ${_mpimajor}.${_mpiminor}; tupe needs 3.1")
  endif()
  add_library(MPI::MPI_CXX INTERFACE IMPORTED)
  target_include_directories(MPI::MPI_CXX INTERFACE "${TUPE_MPI_INCLUDE_DIR}" "${TUPE_MPI_INCLUDE_DIR}/openmpi")
  target_link_libraries(MPI::MPI_CXX INTERFACE "${TUPE_MPI_LIBRARY}")
  set(MPI_CXX_FOUND TRUE)
  # mpirun: Debian names it mpirun.openmpi; it needs OPAL_PREFIX and the prefix's libraries,
  # so launch/gpu_check.sh puts a small wrapper under the plain name.
  if(EXISTS "${TUPE_DEPS_PREFIX}/bin/mpirun")
    set(MPIEXEC_EXECUTABLE "${TUPE_DEPS_PREFIX}/bin/mpirun" CACHE FILEPATH "" FORCE)
  else()
    message(FATAL_ERROR "TUPE_DEPS_PREFIX: no ${TUPE_DEPS_PREFIX}/bin/mpirun (a script setting OPAL_PREFIX and "
                        "LD_LIBRARY_PATH, then running orterun; launch/gpu_check.sh writes one)")
  endif()
  set(MPIEXEC_NUMPROC_FLAG "-np")
  # Debian's serial HDF5 lives in its own sub-folders.
  find_path(HDF5_INCLUDE_DIRS hdf5.h PATHS "${TUPE_DEPS_PREFIX}/include/hdf5/serial" NO_DEFAULT_PATH)
  find_library(HDF5_C_LIBRARIES NAMES hdf5_serial hdf5
               PATHS "${TUPE_DEPS_PREFIX}/lib/${_multiarch}/hdf5/serial" "${TUPE_DEPS_PREFIX}/lib/${_multiarch}"
               NO_DEFAULT_PATH)
  if(NOT HDF5_INCLUDE_DIRS OR NOT HDF5_C_LIBRARIES)
    message(FATAL_ERROR "TUPE_DEPS_PREFIX: serial HDF5 not found under ${TUPE_DEPS_PREFIX}/include/hdf5/serial and "
                        "${TUPE_DEPS_PREFIX}/lib/${_multiarch}/hdf5/serial (libhdf5-dev not unpacked?)")
  endif()
  file(STRINGS "${HDF5_INCLUDE_DIRS}/H5public.h" _h5v REGEX "#define H5_VERS_(MAJOR|MINOR)[ \t]")
  string(REGEX REPLACE ".*H5_VERS_MAJOR[ \t]+([0-9]+).*" "\\1" _h5major "${_h5v}")
  string(REGEX REPLACE ".*H5_VERS_MINOR[ \t]+([0-9]+).*" "\\1" _h5minor "${_h5v}")
  set(HDF5_VERSION "${_h5major}.${_h5minor}")
  if(HDF5_VERSION VERSION_LESS 1.10)
    message(FATAL_ERROR "HDF5 ${HDF5_VERSION} under ${TUPE_DEPS_PREFIX}: tupe needs 1.10 or newer")
  endif()
  set(HDF5_DEFINITIONS "")
  set(ICU_ROOT "${TUPE_DEPS_PREFIX}")
  set(OPENSSL_ROOT_DIR "${TUPE_DEPS_PREFIX}")
  message(STATUS "tupe: dependencies from the relocated prefix ${TUPE_DEPS_PREFIX} (HDF5 ${HDF5_VERSION})")
else()
  find_package(HDF5 1.10 REQUIRED COMPONENTS C)
  find_package(MPI 3.1 REQUIRED COMPONENTS CXX)
endif()

find_package(Boost 1.74 REQUIRED COMPONENTS program_options)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(ICU 72 REQUIRED COMPONENTS uc i18n)
find_package(OpenSSL REQUIRED COMPONENTS Crypto)
find_package(spdlog 1.10 REQUIRED)  # the console log (common/log.cpp); brings fmt

# zlib and libzstd: gzip and Zstandard corpora of `tupe preprocess` (data_pipeline/corpus_stream.cpp),
# found directly like SentencePiece below (a relocated prefix has no usable CMake package files).
find_path(TUPE_ZLIB_INCLUDE_DIR zlib.h)
find_library(TUPE_ZLIB_LIBRARY z)
find_path(TUPE_ZSTD_INCLUDE_DIR zstd.h)
find_library(TUPE_ZSTD_LIBRARY zstd)
if(NOT TUPE_ZLIB_INCLUDE_DIR OR NOT TUPE_ZLIB_LIBRARY OR NOT TUPE_ZSTD_INCLUDE_DIR OR NOT TUPE_ZSTD_LIBRARY)
  message(FATAL_ERROR "zlib or libzstd not found (zlib.h: ${TUPE_ZLIB_INCLUDE_DIR}, libz: ${TUPE_ZLIB_LIBRARY}, "
                      "zstd.h: ${TUPE_ZSTD_INCLUDE_DIR}, libzstd: ${TUPE_ZSTD_LIBRARY}); install zlib1g-dev and libzstd-dev")
endif()
add_library(tupe_compression INTERFACE)
target_include_directories(tupe_compression INTERFACE "${TUPE_ZLIB_INCLUDE_DIR}" "${TUPE_ZSTD_INCLUDE_DIR}")
target_link_libraries(tupe_compression INTERFACE "${TUPE_ZLIB_LIBRARY}" "${TUPE_ZSTD_LIBRARY}")

# SentencePiece: the headers and both libraries, found directly (its pkg-config file
# names /usr, which is wrong in a relocated prefix, and a GPU host may lack pkg-config).
find_path(SENTENCEPIECE_INCLUDE_DIR sentencepiece_processor.h)
find_library(SENTENCEPIECE_LIBRARY sentencepiece)
find_library(SENTENCEPIECE_TRAIN_LIBRARY sentencepiece_train)
if(NOT SENTENCEPIECE_INCLUDE_DIR OR NOT SENTENCEPIECE_LIBRARY OR NOT SENTENCEPIECE_TRAIN_LIBRARY)
  message(FATAL_ERROR "SentencePiece not found (headers: ${SENTENCEPIECE_INCLUDE_DIR}, library: "
                      "${SENTENCEPIECE_LIBRARY}, trainer: ${SENTENCEPIECE_TRAIN_LIBRARY}); install libsentencepiece-dev")
endif()
add_library(tupe_sentencepiece INTERFACE)
target_include_directories(tupe_sentencepiece INTERFACE "${SENTENCEPIECE_INCLUDE_DIR}")
target_link_libraries(tupe_sentencepiece INTERFACE "${SENTENCEPIECE_LIBRARY}" "${SENTENCEPIECE_TRAIN_LIBRARY}")
