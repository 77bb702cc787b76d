#include "common/host_memory.h"

#include <climits>
#include <cstdlib>
#include <cstring>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace tupe {

bool keep_freed_host_memory() {
#if defined(__GLIBC__)
  const char* choice = std::getenv("TUPE_HOST_MALLOC");
  if (choice != nullptr && std::strcmp(choice, "default") == 0) return false;
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  if (tunables != nullptr && std::strstr(tunables, "glibc.malloc.") != nullptr) return false;
  // mallopt returns 1 on success. M_MMAP_MAX = 0: no block is mmap-ed on its own (large
  // requests from a thread's arena that does not fit retry in the main arena, which grows
  // by brk). M_TRIM_THRESHOLD = INT_MAX: the heap top is never given back.
  const bool mmap_off = mallopt(M_MMAP_MAX, 0) == 1;
  const bool trim_off = mallopt(M_TRIM_THRESHOLD, INT_MAX) == 1;
  return mmap_off && trim_off;
#else
  return false;
#endif
}

}  // namespace tupe
