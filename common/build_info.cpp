#include "common/build_info.h"

#include <H5public.h>
#include <mpi.h>
#include <iterator>
#include <torch/version.h>
#ifdef TUPE_BUILD_INFO_CUDA
#include <cuda.h>
#include <nccl.h>
#endif

#include "build_commit.h"  // TUPE_BUILD_COMMIT, written at build time (cmake/TupeCommit.cmake)
#ifndef TUPE_BUILD_TYPE
#define TUPE_BUILD_TYPE "unknown"
#endif
#ifndef TUPE_PROJECT_VERSION
#define TUPE_PROJECT_VERSION "unknown"
#endif

namespace tupe {

namespace {

std::string dotted(long major, long minor, long patch) {
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
}

std::string mpi_version() {
#ifdef OMPI_MAJOR_VERSION
  return dotted(OMPI_MAJOR_VERSION, OMPI_MINOR_VERSION, OMPI_RELEASE_VERSION);
#else
  return "not Open MPI (an MPI " + std::to_string(MPI_VERSION) + "." + std::to_string(MPI_SUBVERSION) + " library)";
#endif
}

// (label as printed, key as recorded)
constexpr const char* kLabels[][2] = {{"tupe", "tupe"},         {"commit", "commit"},     {"build type", "build_type"},
                                      {"LibTorch", "libtorch"}, {"CUDA", "cuda"},         {"NCCL", "nccl"},
                                      {"Open MPI", "openmpi"},  {"HDF5", "hdf5"}};

}  // namespace

std::vector<std::pair<std::string, std::string>> build_info() {
#ifdef TUPE_BUILD_INFO_CUDA
  // CUDA_VERSION is 1000 * major + 10 * minor (12080: 12.8).
  const std::string cuda = std::to_string(CUDA_VERSION / 1000) + "." + std::to_string((CUDA_VERSION % 1000) / 10);
  const std::string nccl = dotted(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH);
#else
  const std::string cuda = "not compiled", nccl = "not compiled";
#endif
  const std::string values[] = {TUPE_PROJECT_VERSION,
                                TUPE_BUILD_COMMIT,
                                TUPE_BUILD_TYPE,
                                dotted(TORCH_VERSION_MAJOR, TORCH_VERSION_MINOR, TORCH_VERSION_PATCH),
                                cuda,
                                nccl,
                                mpi_version(),
                                dotted(H5_VERS_MAJOR, H5_VERS_MINOR, H5_VERS_RELEASE)};
  std::vector<std::pair<std::string, std::string>> out;
  for (size_t i = 0; i < std::size(values); ++i) out.emplace_back(kLabels[i][1], values[i]);
  return out;
}

std::string build_info_text() {
  const auto info = build_info();
  std::string out = "tupe " + info[0].second + "\n";
  for (size_t i = 1; i < info.size(); ++i) {
    const std::string label = kLabels[i][0];
    out += label + std::string(12 - label.size(), ' ') + info[i].second + "\n";
  }
  return out;
}

std::string build_info_line() {
  const auto info = build_info();
  std::string out = "tupe " + info[0].second + ", commit " + info[1].second + ", " + info[2].second + ";";
  for (size_t i = 3; i < info.size(); ++i) out += std::string(i > 3 ? "," : "") + " " + kLabels[i][0] + " " + info[i].second;
  return out;
}

}  // namespace tupe
