// What a bug report needs: which tupe this is and what it was built with. The commit is
// `git describe --always --dirty --tags` of the checkout when CMake configured the build
// ("unknown" when the sources were not a git checkout); the library versions are the
// macros of the headers the build compiled against (torch/version.h, cuda.h, nccl.h, mpi.h,
// H5public.h), not the libraries found at run time.
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace tupe {

/// Name -> value of every build fact, in this order: "tupe" (the project version), "commit",
/// "build_type", "libtorch", "cuda", "nccl", "openmpi", "hdf5". A library the build did not
/// compile against reads "not compiled" (CUDA and NCCL on the CPU path).
std::vector<std::pair<std::string, std::string>> build_info();

/// The lines `tupe --version` prints, one "Name  value" per fact:
///   tupe 0.1.0
///   commit      6f44105-dirty
///   build type  Release
///   LibTorch    2.15.0
///   ...
std::string build_info_text();

/// One line for logs: "tupe 0.1.0, commit 6f44105, Release; LibTorch 2.15.0, CUDA not
/// compiled, NCCL not compiled, Open MPI 4.1.4, HDF5 1.10.8".
std::string build_info_line();

}  // namespace tupe
