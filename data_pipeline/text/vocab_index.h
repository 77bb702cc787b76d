// A string -> id hash table for tokenizer vocabularies: open addressing with linear probing
// over one contiguous character arena, looked up by std::string_view without allocating.
// Built once, then read-only (safe for concurrent lookups).
#pragma once
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace tupe::data_pipeline {

class VocabIndex {
 public:
  /// Adds `token` -> `id`. Returns false (and keeps the old id) when `token` is present.
  bool insert(std::string_view token, int32_t id);

  /// The id of `token`, or -1 when absent.
  int32_t find(std::string_view token) const {
    if (slots_.empty()) return -1;
    const uint64_t h = hash(token);
    const auto tag = static_cast<uint32_t>(h >> 32);
    for (uint64_t i = h & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.id < 0) return -1;
      if (s.tag == tag && s.length == token.size() &&
          std::memcmp(arena_.data() + s.offset, token.data(), token.size()) == 0)
        return s.id;
    }
  }

  /// Number of tokens stored.
  size_t size() const { return count_; }
  /// Longest token stored (bytes).
  size_t max_length_bytes() const { return max_length_bytes_; }

  /// 64-bit hash of bytes (multiply-xorshift over 8-byte words; not cryptographic).
  static uint64_t hash(std::string_view s) {
    const char* p = s.data();
    const size_t n = s.size();
    uint64_t h = 0x9E3779B97F4A7C15ULL ^ (n * 0xD6E8FEB86659FD93ULL);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
      uint64_t w;
      std::memcpy(&w, p + i, 8);
      h = (h ^ w) * 0xBF58476D1CE4E5B9ULL;
      h ^= h >> 31;
    }
    if (i < n) {
      uint64_t w = 0;
      std::memcpy(&w, p + i, n - i);
      h = (h ^ w) * 0x94D049BB133111EBULL;
      h ^= h >> 29;
    }
    h *= 0xFF51AFD7ED558CCDULL;
    return h ^ (h >> 32);
  }

 private:
  struct Slot {
    uint32_t offset = 0;  ///< into arena_
    uint32_t length = 0;  ///< bytes
    uint32_t tag = 0;     ///< high 32 bits of the hash (cheap mismatch test)
    int32_t id = -1;      ///< -1: empty slot
  };
  void grow();

  std::string arena_;
  std::vector<Slot> slots_;
  uint64_t mask_ = 0;
  size_t count_ = 0;
  size_t max_length_bytes_ = 0;
};

}  // namespace tupe::data_pipeline
