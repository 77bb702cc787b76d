// 64-bit FNV-1a: a small, stable (across processes, builds and hosts) hash for comparing
// what ranks hold, e.g. config texts, parameter lists, shard indexes. Not cryptographic.
#pragma once
#include <cstdint>
#include <string_view>

namespace tupe {

inline constexpr uint64_t kFnv1a64Basis = 14695981039346656037ull;  ///< the offset basis

/// FNV-1a 64 of `bytes`, continuing from `h` (kFnv1a64Basis to start), so a long input can
/// be hashed in pieces.
inline uint64_t fnv1a_64(std::string_view bytes, uint64_t h = kFnv1a64Basis) {
  for (const unsigned char c : bytes) {
    h ^= c;
    h *= 1099511628211ull;  // the FNV 64-bit prime
  }
  return h;
}

}  // namespace tupe
