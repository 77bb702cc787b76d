// Helpers of the damaged-shard tests: where a dataset's elements lie in a shard file, bit
// flips, zeroed blocks and rewritten tokens at file offsets, and a version 3 shard turned
// into a version 2 one.
#pragma once
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <string>
#include <vector>

#include "data_pipeline/hdf5_util.h"
#include "data_pipeline/shard_format.h"

namespace tupe::data_pipeline::test {

/// File byte offset of each chunk of an unfiltered 1-D dataset, its chunk length and size.
struct Layout {
  std::vector<int64_t> addresses;
  int64_t chunk = 0;          ///< elements per chunk (0: contiguous)
  int64_t element_bytes = 0;  ///< stored element size
  int64_t numel = 0;          ///< elements
  /// File offset of element `element`'s first byte.
  int64_t offset_of(int64_t element) const {
    return addresses[static_cast<size_t>(chunk ? element / chunk : 0)] +
           (chunk ? element % chunk : element) * element_bytes;
  }
};

/// The layout of dataset `name` of shard `path` (unfiltered; h5::file_layout).
inline Layout layout_of(const std::string& path, const char* name) {
  h5::Lock lock;
  h5::Id file = h5::open_file_readonly(path);
  h5::Id ds(H5Dopen2(file.get(), name, H5P_DEFAULT), H5Dclose);
  const auto dims = h5::dataset_dims(path, file.get(), name);
  const h5::FileLayout l = h5::file_layout(path, ds.get(), name, dims[0]);
  return {l.addresses, static_cast<int64_t>(l.chunk_elements), static_cast<int64_t>(l.element_bytes),
          static_cast<int64_t>(dims[0])};
}

/// Flips bit `bit` of the byte at `offset` of `path` (in place).
inline void flip_bit(const std::string& path, int64_t offset, int bit) {
  const int fd = ::open(path.c_str(), O_RDWR);
  ASSERT_GE(fd, 0) << path;
  unsigned char b = 0;
  ASSERT_EQ(::pread(fd, &b, 1, offset), 1);
  b = static_cast<unsigned char>(b ^ (1u << bit));
  ASSERT_EQ(::pwrite(fd, &b, 1, offset), 1);
  ::close(fd);
}

/// Writes `bytes` zero bytes at `offset` of `path` (in place).
inline void zero_bytes(const std::string& path, int64_t offset, int64_t bytes) {
  const int fd = ::open(path.c_str(), O_RDWR);
  ASSERT_GE(fd, 0) << path;
  const std::vector<unsigned char> zeros(static_cast<size_t>(bytes), 0);
  ASSERT_EQ(::pwrite(fd, zeros.data(), zeros.size(), offset), bytes);
  ::close(fd);
}

/// Turns a version 3 shard into what version 2 wrote: no sample_checksums dataset.
inline void make_version2(const std::string& path) {
  h5::Lock lock;
  h5::Id file(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT), H5Fclose);
  ASSERT_TRUE(file.valid()) << path;
  ASSERT_GE(H5Ldelete(file.get(), kSampleChecksumsDataset, H5P_DEFAULT), 0);
  h5::write_int_attribute(path, file.get(), "format_version", 2);
}

/// Rewrites tokens [first, first + n) of `path` with other ids in the vocabulary (2000 +
/// k mod 20000 for token k), then sets the access and modification times back to `before`'s:
/// size and mtime as they were.
inline void rewrite_in_place(const std::string& path, int64_t first, int64_t n, const struct stat& before) {
  const Layout tokens = layout_of(path, kTokenIdsDataset);
  const int fd = ::open(path.c_str(), O_RDWR);
  ASSERT_GE(fd, 0) << path;
  for (int64_t k = first; k < first + n && k < tokens.numel; ++k) {
    const auto id = static_cast<uint16_t>(2000 + k % 20000);
    ASSERT_EQ(::pwrite(fd, &id, 2, tokens.offset_of(k)), 2);
  }
  const struct timespec times[2] = {before.st_atim, before.st_mtim};
  ASSERT_EQ(::futimens(fd, times), 0);
  ::close(fd);
  struct stat after {};
  ASSERT_EQ(::stat(path.c_str(), &after), 0);
  ASSERT_EQ(after.st_size, before.st_size);
  ASSERT_EQ(after.st_mtim.tv_nsec, before.st_mtim.tv_nsec);
  ASSERT_EQ(after.st_mtim.tv_sec, before.st_mtim.tv_sec);
}

}  // namespace tupe::data_pipeline::test
