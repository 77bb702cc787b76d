#include "data_pipeline/text/vocab_index.h"

#include "common/error.h"

namespace tupe::data_pipeline {

void VocabIndex::grow() {
  const size_t capacity = slots_.empty() ? 64 : slots_.size() * 2;
  std::vector<Slot> old;
  old.swap(slots_);
  slots_.assign(capacity, Slot{});
  mask_ = capacity - 1;
  for (const Slot& s : old) {
    if (s.id < 0) continue;
    const uint64_t h = hash(std::string_view(arena_.data() + s.offset, s.length));
    uint64_t i = h & mask_;
    while (slots_[i].id >= 0) i = (i + 1) & mask_;
    slots_[i] = s;
  }
}

bool VocabIndex::insert(std::string_view token, int32_t id) {
  TUPE_CHECK(id >= 0, "VocabIndex::insert: negative id " << id);
  TUPE_CHECK(arena_.size() + token.size() < (uint64_t{1} << 32), "VocabIndex::insert: vocabulary over 4 GiB");
  // Keep the load factor at most 1/2: short probe sequences.
  if (2 * (count_ + 1) > slots_.size()) grow();
  const uint64_t h = hash(token);
  const auto tag = static_cast<uint32_t>(h >> 32);
  uint64_t i = h & mask_;
  for (; slots_[i].id >= 0; i = (i + 1) & mask_) {
    const Slot& s = slots_[i];
    if (s.tag == tag && s.length == token.size() &&
        std::memcmp(arena_.data() + s.offset, token.data(), token.size()) == 0)
      return false;
  }
  slots_[i] = Slot{static_cast<uint32_t>(arena_.size()), static_cast<uint32_t>(token.size()), tag, id};
  arena_.append(token);
  ++count_;
  if (token.size() > max_length_bytes_) max_length_bytes_ = token.size();
  return true;
}

}  // namespace tupe::data_pipeline
