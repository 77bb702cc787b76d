// The host memory policy (common/host_memory.h): the user's choice (TUPE_HOST_MALLOC=default,
// a glibc.malloc tunable) leaves malloc alone; otherwise a large block no longer gets its own
// mmap. Each CTest test is its own process, so the mallopt of one test does not leak into
// another.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

#include "common/host_memory.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace tupe {
namespace {

/// Restores an environment variable when the test ends.
class EnvGuard {
 public:
  explicit EnvGuard(const char* name) : name_(name) {
    if (const char* v = std::getenv(name)) {
      had_ = true;
      value_ = v;
    }
  }
  ~EnvGuard() { had_ ? ::setenv(name_, value_.c_str(), 1) : ::unsetenv(name_); }

 private:
  const char* name_;
  bool had_ = false;
  std::string value_;
};

TEST(CommonHostMemory, TheUsersChoiceLeavesMallocAlone) {
  EnvGuard a("TUPE_HOST_MALLOC"), b("GLIBC_TUNABLES");
  ::setenv("TUPE_HOST_MALLOC", "default", 1);
  ::unsetenv("GLIBC_TUNABLES");
  EXPECT_FALSE(keep_freed_host_memory());
  ::unsetenv("TUPE_HOST_MALLOC");
  ::setenv("GLIBC_TUNABLES", "glibc.malloc.mmap_threshold=65536", 1);
  EXPECT_FALSE(keep_freed_host_memory());
}

#if defined(__GLIBC__)
/// Bytes of the blocks malloc has mmap-ed on their own (mallinfo2().hblkhd).
size_t mmapped_block_bytes() { return mallinfo2().hblkhd; }

TEST(CommonHostMemory, LargeBlocksComeFromTheHeapOnceApplied) {
  EnvGuard a("TUPE_HOST_MALLOC"), b("GLIBC_TUNABLES");
  ::unsetenv("TUPE_HOST_MALLOC");
  ::unsetenv("GLIBC_TUNABLES");
  constexpr size_t kBytes = size_t{64} << 20;  // above glibc's largest mmap threshold (32 MiB)
  // glibc's default: a 64 MiB block is mmap-ed on its own.
  {
    void* p = std::malloc(kBytes);
    ASSERT_NE(p, nullptr);
    std::memset(p, 1, 4096);
    EXPECT_GE(mmapped_block_bytes(), kBytes);
    std::free(p);
  }
  ASSERT_TRUE(keep_freed_host_memory());
  void* p = std::malloc(kBytes);
  ASSERT_NE(p, nullptr);
  std::memset(p, 1, 4096);
  EXPECT_LT(mmapped_block_bytes(), kBytes);
  std::free(p);
}
#endif

}  // namespace
}  // namespace tupe
